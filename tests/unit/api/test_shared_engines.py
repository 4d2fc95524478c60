"""Apps served together share engines declared the same way."""

from apps import advanced_rag, naive_rag, tool_agent
from teola.api.shared_engines import SharedBackend, share_engines


class Counting:
    def __init__(self):
        self.starts = self.stops = 0
        self.profile = "p"

    async def start(self):
        self.starts += 1

    async def stop(self):
        self.stops += 1


def test_same_engines_share_one_adapter_and_different_ones_do_not():
    a, n, t = advanced_rag.build(), naive_rag.build(), tool_agent.build(llm={"max_num_seqs": 4})
    assert share_engines([a, n, t]) == 3  # llm, embedding, vectordb between advanced and naive RAG
    assert a.backends["llm"] is n.backends["llm"] and isinstance(a.backends["llm"], SharedBackend)
    assert a.backends["embedding"] is n.backends["embedding"]
    assert "llm" not in t.backends  # other options: its own engine
    assert "reranker" not in a.backends  # only one app declares it


async def test_shared_backend_starts_once_and_stops_with_the_last_user():
    inner = Counting()
    shared = SharedBackend(inner)
    await shared.start()
    await shared.start()
    await shared.stop()
    assert (inner.starts, inner.stops) == (1, 0)
    await shared.stop()
    await shared.stop()  # extra stop is harmless
    assert (inner.starts, inner.stops) == (1, 1)
    assert shared.profile == "p"
