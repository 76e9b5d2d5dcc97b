"""The model sees the same conversation after a restart, for every provider AG2 ships a client for.

Each conversation drives AG2's real provider client and the real provider SDK against recorded HTTP responses
(``cassettes/``, sources in its README): the SDK builds and sends every request, a ``MockTransport`` in the
agent process writes it down (fsynced) and answers from the cassette. The agent is a real subprocess spoken to
over ACP stdio by the SDK's real client (``_acp_client``), run three ways (``_provider_run``): AG2's own
``ACPAgent`` with its in-memory storage, ``DurableACPAgent`` without a restart, and ``DurableACPAgent`` SIGKILLed
after every turn, the next turn served by a new process after ``session/load`` or ``session/resume``.

The proof: every request the provider got is the same request in all three runs (method, path, body byte for
byte, headers). In particular the first request a restarted process sends, which is built from nothing but
what the previous processes stored, is byte-identical to the one AG2 sends from the live objects. And the
bodies are checked for what makes them worth comparing: each provider's replayed items (reasoning with its
encrypted content, redacted thinking, server tool calls and results, thought signatures, files) are there.

One case cannot be byte-identical between two runs, for a reason outside the storage: Gemini function calls
that come without an id get one minted by AG2 (``uuid4``) when the response arrives. That conversation
(``gemini-minted-ids``) is checked separately: the minted ids are the only difference, and the id minted by
a process reaches the provider again, unchanged, from every later process.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any
from uuid import UUID

import pytest
from _provider_http import CASSETTES, load_cassette
from _provider_run import Conversation, Run, describe_difference, image, pdf, play_all, text

# The string Claude 3.7 Sonnet answers with a redacted_thinking block (zed-industries/zed#33317).
ANTHROPIC_REDACTED_THINKING_TRIGGER = (
    "ANTHROPIC_MAGIC_STRING_TRIGGER_REDACTED_THINKING_46C9A13E193C177646C7398A98432ECCCE4C1253D5E2D82641AC0E52CC2876CB"
)

CONVERSATIONS = [
    Conversation(
        "openai",
        "openai_chat.json",
        [
            [text("What is a kumquat? Check the glossary.")],
            [text("What fruit is in this photo?"), image()],
            [text("Here is my price list. Which is cheaper, kumquats or loquats? Check the glossary for both."), pdf()],
            [text("Thanks, that is all.")],
        ],
    ),
    Conversation(
        "openai-responses",
        "openai_responses.json",
        [
            [text("Is it kumquat season in Valencia, and what is the weather there today? Search the web.")],
            [text("Which fruit is this? Look it up in the glossary."), image()],
            [text("Here is my price list. Which is cheaper?"), pdf()],
            [text("Thanks, that is all.")],
        ],
    ),
    Conversation(
        "anthropic",
        "anthropic.json",
        [
            [text("What is the latest news about the kumquat harvest? Search the web.")],
            [text(f"{ANTHROPIC_REDACTED_THINKING_TRIGGER} Now look kumquat up in the glossary.")],
            [text("Count the fruit in this photo and save the count as a CSV file, using code."), image()],
            [text("What does my price list say about loquats?"), pdf()],
        ],
    ),
    Conversation(
        "gemini",
        "gemini.json",
        [
            [text("What fruit is this? Look it up in the glossary."), image()],
            [text("How many grams do 7 kumquats weigh at 23 g each? Use code.")],
            [text("When are kumquats in season in Florida? Search the web.")],
            [text("Here is my price list. Look loquats up in the glossary too."), pdf()],
        ],
    ),
    Conversation(
        "gemini-minted-ids",
        "gemini_minted_ids.json",
        [
            [text("What is a kumquat? Check the glossary.")],
            [text("And a loquat?")],
            [text("Which one is sweeter?")],
        ],
        modes=("memory", "restart"),
    ),
]
BY_NAME = {c.name: c for c in CONVERSATIONS}
BYTE_IDENTICAL = ["openai", "openai-responses", "anthropic", "gemini"]

EXCLUDED_HEADERS: frozenset[str] = frozenset()
"""Request headers left out of the comparison: none. Retry counts, timeouts, user agents and content lengths
came out the same in every run (no request was retried, the SDKs and the bodies are the same), so every header
is compared; a retried request would differ in ``x-stainless-retry-count`` and fail this on purpose."""


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Run | BaseException]:
    """Every conversation, every mode, played once for the module (concurrently, bounded: see play_all)."""
    return asyncio.run(play_all(CONVERSATIONS, tmp_path_factory.mktemp("providers")))


def run_of(played: dict[tuple[str, str], Run | BaseException], name: str, mode: str) -> Run:
    result = played[(name, mode)]
    if isinstance(result, BaseException):
        raise AssertionError(f"the {mode} run of {name} failed: {result!r}") from result
    assert result.stop_reasons == ["end_turn"] * len(BY_NAME[name].turns), (result.stop_reasons, result.files.stderr())
    return result


def cassette_bodies(name: str) -> list[Any]:
    return [i["response"]["body"] for i in load_cassette(CASSETTES / BY_NAME[name].cassette)["interactions"]]


def headers(request: dict[str, Any]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in request["headers"] if k.lower() not in EXCLUDED_HEADERS]


# -- the proof -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", BYTE_IDENTICAL)
def test_every_request_is_byte_identical_with_and_without_restarts(
    played: dict[tuple[str, str], Run | BaseException], name: str
) -> None:
    reference = run_of(played, name, "memory")
    expected = len(cassette_bodies(name))
    assert len(reference.requests) == expected, "the conversation did not use the whole cassette"
    for mode in ("durable", "restart"):
        run = run_of(played, name, mode)
        assert run.answers == reference.answers, mode  # the client was told the same things
        assert len(run.requests) == expected, (mode, len(run.requests))
        restarted = set(run.first_request_of_turn[1:]) if mode == "restart" else set()
        for index, (ours, theirs) in enumerate(zip(reference.requests, run.requests, strict=True)):
            where = f"{name}, {mode} run, request {index + 1}" + (
                " (the first one a restarted process sent)" if index in restarted else ""
            )
            assert (theirs["method"], theirs["path"]) == (ours["method"], ours["path"]), where
            ours_body, theirs_body = reference.bodies()[index], run.bodies()[index]
            assert theirs_body == ours_body, f"{where}: the body differs\n{describe_difference(ours_body, theirs_body)}"
            assert headers(theirs) == headers(ours), where
    restart = run_of(played, name, "restart")
    # Every turn after the first was served by a new process, half of them after a load that replayed the session.
    assert restart.first_request_of_turn[0] == 0 and len(restart.first_request_of_turn) == len(BY_NAME[name].turns)
    assert restart.replays and all(kinds and kinds[0] == "user_message_chunk" for kinds in restart.replays)


def test_minted_gemini_call_ids_are_the_only_difference_and_survive_restarts(
    played: dict[tuple[str, str], Run | BaseException],
) -> None:
    """Gemini function calls without an id: AG2 mints ``str(uuid4())`` for each when the response arrives.

    So no two runs send the same bytes: that is AG2's doing, not the storage's. What the storage owes is the
    minted id itself, and this checks it: each id a process minted reaches the provider unchanged from every
    later process (after SIGKILL and load or resume), and with each run's minted ids in their order of
    appearance put side by side, the bodies are byte-identical to the reference's.
    """
    reference = run_of(played, "gemini-minted-ids", "memory")
    restart = run_of(played, "gemini-minted-ids", "restart")
    assert len(reference.requests) == len(restart.requests) == len(cassette_bodies("gemini-minted-ids"))

    def minted(run: Run) -> list[str]:
        ids: list[str] = []
        for body in run.json_bodies():
            for content in body["contents"]:
                for part in content["parts"]:
                    call = part.get("functionCall") or part.get("functionResponse")
                    if call and call.get("id") and call["id"] not in ids:
                        ids.append(call["id"])
        return ids

    ours, theirs = minted(reference), minted(restart)
    assert len(ours) == len(theirs) == 2  # one per function call in the cassette, which has none
    for value in ours + theirs:
        assert UUID(value).version == 4, value
    assert not set(ours) & set(theirs)

    # Each id is in every request from the one answering its call on (the call and its response: twice), and
    # so sent again by every later process: turn 1's id by the processes of turns 2 and 3, turn 2's by turn 3's.
    for turn, minted_id in enumerate(theirs):
        counts = [body.count(minted_id.encode()) for body in restart.bodies()]
        first = counts.index(2)
        assert first < restart.first_request_of_turn[turn + 1], (turn, counts)  # minted in its own turn
        assert counts[first:] == [2] * (len(counts) - first), (turn, counts)
        assert set(counts[:first]) == {0}, (turn, counts)

    for index, (a, b) in enumerate(zip(reference.bodies(), restart.bodies(), strict=True)):
        for mine, other in zip(ours, theirs, strict=True):
            b = b.replace(other.encode(), mine.encode())
        assert b == a, f"request {index + 1}: beyond the minted ids\n{describe_difference(a, b)}"
        assert headers(restart.requests[index]) == headers(reference.requests[index])


# -- what the requests carry: the comparison above is worth something only if these are in them --------------------


CONTENT_MODES = ["memory", "restart"]
"""The reference shows the conversation exercises what it claims; the restart run, that the model is sent it
after restarts (byte-identical anyway, by the test above, when that passes)."""


def input_items(body: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [item for item in body["input"] if item.get("type") == kind]


@pytest.mark.parametrize("mode", CONTENT_MODES)
def test_openai_responses_replays_reasoning_web_search_and_calls(
    played: dict[tuple[str, str], Run | BaseException], mode: str
) -> None:
    run = run_of(played, "openai-responses", mode)
    bodies = run.json_bodies()
    cassette = cassette_bodies("openai-responses")
    assert bodies[0]["include"] == ["web_search_call.action.sources", "reasoning.encrypted_content"]
    first, web_search, second = cassette[0]["output"][:3]

    turn2 = bodies[run.first_request_of_turn[1]]  # sent by a process started after a SIGKILL and session/load
    reasoning = input_items(turn2, "reasoning")
    # Two summary parts made two OpenAIReasoningEvents of one item: it is replayed once, whole.
    assert [r["id"] for r in reasoning] == [first["id"], second["id"]]
    assert reasoning[0]["encrypted_content"] == first["encrypted_content"]
    assert reasoning[0]["summary"] == first["summary"] and reasoning[1]["summary"] == []
    (search,) = input_items(turn2, "web_search_call")
    assert search["id"] == web_search["id"]
    # The source the SDK's own model_validate rejects (type "api", no url) reaches the API again as it came.
    assert search["action"]["sources"] == web_search["action"]["sources"]
    assert {"type": "api", "name": "oai-weather"} in search["action"]["sources"]
    assert turn2["input"][-1]["content"][0]["type"] == "input_image"

    after_tool = bodies[run.first_request_of_turn[1] + 1]
    (call,) = input_items(after_tool, "function_call")
    assert (call["call_id"], call["name"]) == ("call_Vd8nJ2kQ5wR1tY7uP3sL0mXa", "lookup")
    (output,) = input_items(after_tool, "function_call_output")
    assert output["call_id"] == call["call_id"] and "rose family" in output["output"]
    reasoning_ids = [r["id"] for r in input_items(after_tool, "reasoning")]
    assert reasoning_ids[-1] == cassette[1]["output"][0]["id"]

    turn3 = bodies[run.first_request_of_turn[2]]
    (file_part,) = [
        p for m in turn3["input"] if m.get("role") == "user" for p in m["content"] if p["type"] == "input_file"
    ]
    assert file_part["file_data"] == "data:application/pdf;base64," + base64.b64encode(pdf_bytes()).decode()
    turn4 = bodies[run.first_request_of_turn[3]]
    assert [r["id"] for r in input_items(turn4, "reasoning")] == [
        first["id"],
        second["id"],
        cassette[1]["output"][0]["id"],
        cassette[3]["output"][0]["id"],
    ]


@pytest.mark.parametrize("mode", CONTENT_MODES)
def test_anthropic_replays_redacted_thinking_server_tools_and_calls(
    played: dict[tuple[str, str], Run | BaseException], mode: str
) -> None:
    run = run_of(played, "anthropic", mode)
    bodies = run.json_bodies()
    cassette = cassette_bodies("anthropic")

    def blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
        return [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]

    turn2 = bodies[run.first_request_of_turn[1]]
    replayed = blocks(turn2)
    server_use, search_result = cassette[0]["content"][2], cassette[0]["content"][3]
    assert [b for b in replayed if b["type"] == "server_tool_use"] == [server_use]
    (result,) = [b for b in replayed if b["type"] == "web_search_tool_result"]
    assert result["tool_use_id"] == server_use["id"]
    assert [r["encrypted_content"] for r in result["content"]] == [
        r["encrypted_content"] for r in search_result["content"]
    ]
    # AG2 1.2.1 turns a thinking block into a transient ModelReasoning: neither it nor its signature is ever
    # stored or sent back (with or without a restart). If a release starts replaying them, this says so.
    assert not [b for b in replayed if b["type"] == "thinking"]

    after_tool = blocks(bodies[run.first_request_of_turn[1] + 1])
    (redacted,) = [b for b in after_tool if b["type"] == "redacted_thinking"]
    assert redacted["data"] == cassette[1]["content"][0]["data"]
    (use,) = [b for b in after_tool if b["type"] == "tool_use"]
    assert use == cassette[1]["content"][2]  # type, id, name and input, as the API sent them
    (tool_result,) = [b for b in after_tool if b["type"] == "tool_result"]
    assert tool_result["tool_use_id"] == use["id"] and "glossary entry 7" in tool_result["content"]

    turn4 = blocks(bodies[run.first_request_of_turn[3]])
    code_use, code_result = cassette[3]["content"][2], cassette[3]["content"][3]
    assert code_use in turn4 and code_result in turn4  # bash_code_execution with its output file, as it came
    assert not [b for b in turn4 if b["type"] == "container_upload"]  # AG2 never replays it (the API refuses it)
    images = [b for b in turn4 if b["type"] == "image"]
    assert [i["source"]["data"] for i in images] == [base64.b64encode(png_bytes()).decode()]
    (document,) = [b for b in turn4 if b["type"] == "document"]
    assert document["source"]["data"] == base64.b64encode(pdf_bytes()).decode()


@pytest.mark.parametrize("mode", CONTENT_MODES)
def test_gemini_replays_thought_signatures_code_execution_and_calls(
    played: dict[tuple[str, str], Run | BaseException], mode: str
) -> None:
    run = run_of(played, "gemini", mode)
    bodies = run.json_bodies()
    cassette = cassette_bodies("gemini")

    def parts(body: dict[str, Any]) -> list[dict[str, Any]]:
        return [p for c in body["contents"] for p in c["parts"]]

    def signature(part: dict[str, Any]) -> bytes:
        # The API sends standard base64; the SDK decodes it to bytes and sends back URL-safe base64.
        return base64.urlsafe_b64decode(part["thoughtSignature"])

    turn2 = parts(bodies[run.first_request_of_turn[1]])
    (call,) = [p for p in turn2 if "functionCall" in p]
    recorded = cassette[0]["candidates"][0]["content"]["parts"][0]
    assert call["functionCall"]["id"] == recorded["functionCall"]["id"]
    assert signature(call) == base64.b64decode(recorded["thoughtSignature"])
    (response,) = [p for p in turn2 if "functionResponse" in p]
    assert response["functionResponse"]["id"] == recorded["functionCall"]["id"]
    assert turn2[1]["inlineData"] == {"data": base64.urlsafe_b64encode(png_bytes()).decode(), "mime_type": "image/png"}

    turn3 = parts(bodies[run.first_request_of_turn[2]])
    recorded_code = cassette[2]["candidates"][0]["content"]["parts"]
    assert [p for p in turn3 if "executableCode" in p] == [recorded_code[0]]
    assert [p for p in turn3 if "codeExecutionResult" in p] == [recorded_code[1]]

    turn4 = parts(bodies[run.first_request_of_turn[3]])
    assert not any("groundingMetadata" in json.dumps(p) for p in turn4)  # grounding is stored, never replayed
    after_tool = parts(bodies[run.first_request_of_turn[3] + 1])
    (loquat,) = [
        p for p in after_tool if p.get("functionCall", {}).get("name") == "lookup" and "loquat" in json.dumps(p)
    ]
    recorded_loquat = cassette[4]["candidates"][0]["content"]["parts"][0]
    assert signature(loquat) == base64.b64decode(recorded_loquat["thoughtSignature"])
    assert any(p.get("inlineData", {}).get("mime_type") == "application/pdf" for p in after_tool)


@pytest.mark.parametrize("mode", CONTENT_MODES)
def test_openai_chat_replays_calls_and_files(played: dict[tuple[str, str], Run | BaseException], mode: str) -> None:
    run = run_of(played, "openai", mode)
    bodies = run.json_bodies()
    turn2 = bodies[run.first_request_of_turn[1]]["messages"]
    assert [m["role"] for m in turn2] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert turn2[2]["tool_calls"][0]["id"] == turn2[3]["tool_call_id"] == "call_Qm3xV8rT2pL6nY0wK4sJ9dHc"
    assert turn2[-1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    turn4 = bodies[run.first_request_of_turn[3]]["messages"]
    (with_file,) = [
        m
        for m in turn4
        if m["role"] == "user"
        and isinstance(m["content"], list)
        and len(m["content"]) == 2
        and m["content"][1]["type"] == "file"
    ]
    assert with_file["content"][1]["file"]["filename"] == "file.pdf"
    (two_calls,) = [m for m in turn4 if len(m.get("tool_calls") or []) == 2]
    ids = [c["id"] for c in two_calls["tool_calls"]]
    assert [m["tool_call_id"] for m in turn4 if m["role"] == "tool"][-2:] == ids


def png_bytes() -> bytes:
    return (CASSETTES / "kumquat.png").read_bytes()


def pdf_bytes() -> bytes:
    return (CASSETTES / "price-list.pdf").read_bytes()


# -- the cassettes are what the SDKs parse ---------------------------------------------------------------------------


def _extras(model: Any, path: str = "$") -> list[str]:
    """Keys a pydantic model kept without declaring them (the OpenAI and Anthropic SDKs allow extras)."""
    from pydantic import BaseModel

    found: list[str] = []
    if isinstance(model, BaseModel):
        found += [f"{path}.{key}" for key in model.model_extra or {}]
        for key in type(model).model_fields:
            found += _extras(getattr(model, key), f"{path}.{key}")
    elif isinstance(model, list):
        for index, value in enumerate(model):
            found += _extras(value, f"{path}[{index}]")
    return found


def test_every_recorded_response_is_one_the_sdk_models() -> None:
    """Each cassette body validates against the SDK's own response type, with no key the SDK does not declare.

    Two deliberate exceptions, both what the real API returns: the Responses API's ``store`` field (in its
    documented response object, not in the SDK's model) and the web-search source ``{"type": "api", "name":
    "oai-weather"}`` (reported in openai/openai-python#2636), which ``ActionSearchSource`` rejects; the SDK builds
    response objects without validation, so it reaches AG2 anyway.
    """
    from anthropic.types import Message
    from google.genai import types as genai
    from openai.types.chat import ChatCompletion
    from openai.types.responses import Response
    from pydantic import ValidationError

    for body in cassette_bodies("openai"):
        assert _extras(ChatCompletion.model_validate(body)) == []
    for body in cassette_bodies("anthropic"):
        assert _extras(Message.model_validate(body)) == []
    for name in ("gemini", "gemini-minted-ids"):
        for body in cassette_bodies(name):
            genai.GenerateContentResponse.model_validate(body)  # google-genai forbids undeclared keys itself
    responses = cassette_bodies("openai-responses")
    for body in responses[1:]:
        assert _extras(Response.model_validate(body)) == ["$.store"]
    with pytest.raises(ValidationError) as refused:
        Response.model_validate(responses[0])
    search_errors = {
        (error["loc"][-2:], error["type"])
        for error in refused.value.errors()
        if error["loc"][:4] == ("output", 1, "ResponseFunctionWebSearch", "action")
        and error["loc"][4] == "ActionSearch"
    }
    assert search_errors == {((2, "type"), "literal_error"), ((2, "url"), "missing")}
    without_api_source = json.loads(json.dumps(responses[0]))
    without_api_source["output"][1]["action"]["sources"].pop(2)
    assert _extras(Response.model_validate(without_api_source)) == ["$.store"]


# -- what the file holds ---------------------------------------------------------------------------------------------


PROVIDER_EVENTS = {
    "openai": set(),
    "openai-responses": {"OpenAIReasoningEvent", "OpenAIServerToolCallEvent", "OpenAIServerToolResultEvent"},
    "anthropic": {
        "AnthropicRedactedThinkingEvent",
        "AnthropicServerToolCallEvent",
        "AnthropicServerToolResultEvent",
        "AnthropicContainerUploadEvent",
    },
    "gemini": {"GeminiServerToolCallEvent", "GeminiServerToolResultEvent", "GeminiToolCallEvent"},
}


async def stored_events(run: Run) -> list[Any]:
    from sessionstore import SQLiteStorage
    from sessionstore.ag2 import AG2Codec

    async with SQLiteStorage(run.files.db, codec=AG2Codec()) as storage:
        return list(await storage.get_history(UUID(hex=run.session_id)))


@pytest.mark.parametrize("name", BYTE_IDENTICAL)
def test_the_file_holds_every_provider_event_and_restarts_lose_none(
    played: dict[tuple[str, str], Run | BaseException], name: str
) -> None:
    """Read back by a later process, every event decodes to its class (none is left unknown, which the mappers
    would skip in silence: grounding and container uploads, for one, never reach a request body to be compared).
    The SIGKILLed run stored the same events, in the same order, as the run without restarts."""
    from ag2.events import UnknownEvent

    durable = asyncio.run(stored_events(run_of(played, name, "durable")))
    restart = asyncio.run(stored_events(run_of(played, name, "restart")))
    assert not [e for e in restart if isinstance(e, UnknownEvent)]
    assert [type(e).__name__ for e in restart] == [type(e).__name__ for e in durable]
    classes = {type(e).__name__ for e in restart}
    for event in restart:
        calls = getattr(getattr(event, "tool_calls", None), "calls", None) or []
        classes.update(type(call).__name__ for call in calls)
    assert PROVIDER_EVENTS[name] <= classes, PROVIDER_EVENTS[name] - classes
