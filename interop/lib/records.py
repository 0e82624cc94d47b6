"""The records the suite produces, derived from (prefix, index) alone.

Producers (Python and interop/workers/jsclient.js, which repeats these formulas) write record
i as below; the checker recomputes them to compare every field a consumer read.
"""


def key(prefix, i):
    return "%s-%06d" % (prefix, i)


def value(prefix, i):
    return ("value-%s-%d-" % (prefix, i) + "x" * (i % 37)).encode()


def headers(i):
    return [("seq", str(i).encode()), ("bin", bytes([i % 256, 0, 255 - i % 256]))]


def timestamp(ts_base, i):
    return ts_base + i


def topic_of(topics, i):
    return topics[i % len(topics)]


def index_of(k):
    """Record index from a key written by key()."""
    return int(k.rsplit("-", 1)[1])
