"""The peer: the same `#steps:N` scenario written the way a LangGraph user writes it, checkpointed in PostgreSQL.

A `StateGraph` over `MessagesState` with two nodes, the documented tool-calling loop:

    START → model → (tools_condition) → tools → model → … → END

- model: `ChatOpenAI(base_url=<stand-in>/v1, api_key="x", streaming=True, stream_usage=True)` bound to the
  same tool schemas our path sends (`bind_tools` with the exact OpenAI-format entries: every shop tool and
  record_outcome), called with the same system prompt and customer message;
- tools: the prebuilt `ToolNode`, one `StructuredTool` per schema, each returning the same canned string the
  floor uses (the search_policy result of the same size for every tool; `{"recorded":"resolved"}` for
  record_outcome);
- checkpointer: `PostgresSaver` (langgraph.checkpoint.postgres) on one connection opened with
  `PostgresSaver.from_conn_string` (autocommit, as the package opens it) to the section's own PostgreSQL
  database, its tables made by `saver.setup()`;
- run: `graph.stream(input, {"configurable": {"thread_id": <new uuid>}}, stream_mode="messages",
  durability="sync")`: every step's checkpoint (and its pending writes) committed before the next step
  starts; the streamed tokens are consumed (counted) as they come.

`create_react_agent` exists in this version of langgraph.prebuilt but is deprecated there (moved to another
package); the graph below is what it builds, written out. The packages are pinned in bench/requirements.txt
and are not dependencies of the desk: `.venv/bin/pip install -r bench/requirements.txt` installs them.
"""

from __future__ import annotations

import uuid
from contextlib import ExitStack

PACKAGES = ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-postgres", "langgraph-prebuilt",
            "langchain-core", "langchain-openai", "langsmith")
INSTALL = ".venv/bin/pip install -r bench/requirements.txt"


def available() -> str | None:
    """None when the peer's packages import, else why not."""
    try:
        import langchain_openai  # noqa: F401
        import langgraph.checkpoint.postgres  # noqa: F401
        import langgraph.graph  # noqa: F401
        import langgraph.prebuilt  # noqa: F401
    except ImportError as e:
        return str(e)
    return None


def versions() -> list[tuple[str, str]]:
    from importlib import metadata

    out = []
    for name in PACKAGES:
        try:
            out.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            out.append((name, f"not installed (`{INSTALL}`)"))
    return out


class LangGraphPeer:
    """The compiled graph and its checkpointer's connection, opened once and kept (as a server would)."""

    def __init__(self, *, base_url: str, model: str, database_url: str, tool_specs: list[dict],
                 tool_results: dict[str, str]):
        from langchain_core.tools import StructuredTool
        from langchain_openai import ChatOpenAI
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.graph import START, MessagesState, StateGraph
        from langgraph.prebuilt import ToolNode, tools_condition

        self._stack = ExitStack()
        self.saver = self._stack.enter_context(PostgresSaver.from_conn_string(database_url))
        self.saver.setup()

        llm = ChatOpenAI(model=model, base_url=base_url, api_key="x", streaming=True, stream_usage=True)
        bound = llm.bind_tools(tool_specs)

        def tool(spec: dict) -> StructuredTool:
            fn = spec["function"]
            result = tool_results.get(fn["name"]) or tool_results["*"]
            return StructuredTool.from_function(func=lambda **_: result, name=fn["name"],
                                                description=fn.get("description") or fn["name"],
                                                args_schema=fn.get("parameters") or {"type": "object",
                                                                                     "properties": {}})

        def call_model(state: MessagesState) -> dict:
            return {"messages": [bound.invoke(state["messages"])]}

        builder = StateGraph(MessagesState)
        builder.add_node("model", call_model)
        builder.add_node("tools", ToolNode([tool(s) for s in tool_specs]))
        builder.add_edge(START, "model")
        builder.add_conditional_edges("model", tools_condition)
        builder.add_edge("tools", "model")
        self.graph = builder.compile(checkpointer=self.saver)

    def close(self) -> None:
        self._stack.close()

    def stream(self, messages: list[dict], *, recursion_limit: int = 500) -> dict:
        """One run on a new thread; every streamed token consumed. Returns the thread id and the counts."""
        thread_id = str(uuid.uuid4())
        config = {"configurable": {"thread_id": thread_id}, "recursion_limit": recursion_limit}
        tokens = chunks = 0
        for chunk, meta in self.graph.stream({"messages": messages}, config, stream_mode="messages",
                                             durability="sync"):
            if meta.get("langgraph_node") == "model":
                chunks += 1
                if chunk.content:
                    tokens += 1
        return {"thread_id": thread_id, "chunks": chunks, "tokens": tokens}

    def model_calls(self, thread_id: str) -> int:
        """AIMessages in the thread's last committed checkpoint (read back from PostgreSQL)."""
        from langchain_core.messages import AIMessage

        state = self.graph.get_state({"configurable": {"thread_id": thread_id}})
        return sum(isinstance(m, AIMessage) for m in state.values.get("messages", ()))

    def checkpoints(self, thread_id: str) -> int:
        return sum(1 for _ in self.saver.list({"configurable": {"thread_id": thread_id}}))
