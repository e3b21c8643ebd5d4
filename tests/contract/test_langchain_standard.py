"""LangChain's own standard retriever suite (`langchain-tests`) against our retriever and the live service."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain_tests", reason="langchain-tests is in the dev extra")

from langchain_tests.integration_tests import RetrieversIntegrationTests

from hybridrag.client.adapters.langchain import HybridRagRetriever


class TestHybridRagRetrieverStandard(RetrieversIntegrationTests):
    @pytest.fixture(autouse=True)
    def _service(self, live_service: str) -> None:
        self._base_url = live_service

    @property
    def retriever_constructor(self) -> type[HybridRagRetriever]:
        return HybridRagRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        # minRelevance 0 so that a 12-document corpus can always fill k=3.
        return {"base_url": self._base_url, "search_options": {"filters": {"minRelevance": 0}}}

    @property
    def retriever_query_example(self) -> str:
        return "Who founded Sony?"


def test_unknown_invoke_keywords_are_refused(live_service: str) -> None:
    retriever = HybridRagRetriever(base_url=live_service)
    with pytest.raises(TypeError, match="top_n"):
        retriever.invoke("Sony", top_n=2)
    with pytest.raises(ValueError, match="k must be"):
        retriever.invoke("Sony", k=0)
    with pytest.raises(ValueError, match="with k, not"):
        HybridRagRetriever(base_url=live_service, search_options={"limit": 3})
