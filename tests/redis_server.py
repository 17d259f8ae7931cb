"""A real ``redis-server`` for the tests: on 127.0.0.1, a free port, no persistence.

Started and stopped by the tests themselves (Debian's package; ``.ci/run`` installs it). Ready
when the server says so on its log, never after a sleep.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import tempfile
import threading
from typing import Any

import pytest

BINARY = shutil.which("redis-server")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_cluster_port(taken: set[int]) -> int:
    """A free port whose cluster bus port (10,000 higher, at most 65,535) is free too."""
    for port in random.sample(range(20_000, 45_000), 500):
        bus = port + 10_000
        if not {port, bus} & taken and _free(port) and _free(bus):
            return port
    raise RuntimeError("no free pair of ports for a cluster node")


class RedisServer:
    """One server process; ``stop`` and ``start`` again keep its port (and lose its data).

    ``tls``: (certificate, key) files: the server speaks TLS only. ``password``: AUTH needed.
    """

    def __init__(
        self,
        *,
        tls: tuple[str, str] | None = None,
        password: str | None = None,
        port: int | None = None,
    ) -> None:
        if BINARY is None:
            pytest.skip("redis-server is not installed (Debian: apt-get install redis-server)")
        pytest.importorskip("redis")
        self.port = free_port() if port is None else port
        self._dir = tempfile.TemporaryDirectory(prefix="loopguard-redis-")
        self._process: subprocess.Popen[str] | None = None
        self._options: list[str] = ["--port", str(self.port)]
        if tls is not None:
            cert, key = tls
            self._options = ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", cert]
            self._options += ["--tls-key-file", key, "--tls-ca-cert-file", cert]
            self._options += ["--tls-auth-clients", "no"]
        if password is not None:
            self._options += ["--requirepass", password]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        assert BINARY is not None
        assert self._process is None
        fixed = ["--bind", "127.0.0.1", "--appendonly", "no", "--daemonize", "no"]
        process = subprocess.Popen(
            [BINARY, *fixed, *self._options, "--save", "", "--dir", self._dir.name],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        ready = threading.Event()
        lines: list[str] = []

        def read() -> None:  # keeps draining the log so the server never blocks on it
            assert process.stdout is not None
            for line in process.stdout:
                lines.append(line)
                if "Ready to accept connections" in line:
                    ready.set()
            ready.set()  # the server exited

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(timeout=30) or process.poll() is not None:
            process.kill()
            raise RuntimeError("redis-server did not start:\n" + "".join(lines[-20:]))
        self._process = process

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=30)
            self._process = None

    def client(self) -> Any:
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10)

    def close(self) -> None:
        self.stop()
        self._dir.cleanup()


class RedisClusterServers:
    """A real Redis Cluster of ``nodes`` masters (no replicas) on 127.0.0.1, each a
    ``redis-server`` started as :class:`RedisServer` starts one, joined by ``redis-cli --cluster
    create`` (Debian's redis-tools, a dependency of redis-server)."""

    def __init__(self, nodes: int = 3) -> None:
        self.cli = shutil.which("redis-cli")
        if self.cli is None:
            pytest.skip("redis-cli is not installed (Debian: apt-get install redis-tools)")
        taken: set[int] = set()
        self.nodes = []
        for _ in range(nodes):
            port = free_cluster_port(taken)
            taken |= {port, port + 10_000}
            node = RedisServer(port=port)
            node._options += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
            self.nodes.append(node)

    def start(self) -> None:
        assert self.cli is not None
        for node in self.nodes:
            node.start()
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        create = [self.cli, "--cluster", "create", *addresses, "--cluster-replicas", "0"]
        # ``--cluster create`` returns once every node has joined and the slots are assigned.
        subprocess.run([*create, "--cluster-yes"], check=True, capture_output=True, timeout=60)
        settled = threading.Event()
        for _ in range(200):  # the nodes agree on the cluster's state within a few gossip rounds
            states = [n.client().execute_command("CLUSTER INFO") for n in self.nodes]
            if all(state.get("cluster_state") == "ok" for state in states):  # parsed by redis-py
                return
            settled.wait(0.05)
        raise RuntimeError("the Redis Cluster did not reach cluster_state:ok")

    def client(self) -> Any:
        from redis.cluster import RedisCluster

        return RedisCluster(host="127.0.0.1", port=self.nodes[0].port, socket_timeout=10)

    def close(self) -> None:
        for node in self.nodes:
            node.close()


def self_signed(directory: str) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and its key, made with ``openssl`` (skips without it)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    cert, key = f"{directory}/cert.pem", f"{directory}/key.pem"
    names = ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
    files = ["-keyout", key, "-out", cert]
    new = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    subprocess.run([openssl, *new, *names, *files], check=True, capture_output=True)
    return cert, key
