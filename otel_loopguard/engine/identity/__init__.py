"""Identity and digests: what makes two calls, or two outcomes, the same."""
