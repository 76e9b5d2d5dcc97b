"""The model sees the same conversation after a restart, for every provider AG2 ships a client for.

Each conversation drives AG2's real provider client and the real provider SDK against recorded HTTP responses
(``cassettes/``, sources in its README): the SDK builds and sends every request, a ``MockTransport`` in the
agent process writes it down (fsynced) and answers from the cassette. The agent is a real subprocess spoken to
over ACP stdio by the SDK's real client (``_acp_client``), run two ways (``_provider_run``): AG2's own
``ACPAgent`` with its in-memory storage, all turns in one process (the reference), and ``DurableACPAgent`` on a
SQLite file, SIGKILLed after every turn, the next turn served by a new process after ``session/load`` (turn 2)
or ``session/resume`` (turn 3).

The proof: every request the provider got is the same request in both runs (method, path, headers, body byte
for byte). In particular the first request each restarted process sends, built from nothing but what the
killed processes stored, is byte-identical to the one AG2 builds from the live objects. The bodies are checked
for what makes them worth comparing (each provider's replayed items: reasoning with its encrypted content,
redacted thinking, server tool calls and results, thought signatures, images and PDFs), and the file for the
provider events no request shows (grounding, container uploads, the web-search source the SDK cannot validate).

One case cannot be byte-identical between two runs, for a reason outside the storage: Gemini function calls
that come without an id get one minted by AG2 (``uuid4``) when the response arrives. That conversation
(``gemini-minted-ids``) is checked on its own: the minted ids are the only difference, and the id minted by
the killed process reaches the provider unchanged from the next.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any
from uuid import UUID

import pytest
from _provider_http import CASSETTES, load_cassette
from _provider_run import PDF, PNG, Conversation, Run, describe_difference, image, pdf, play_all, text

# The reference run drives the Anthropic SDK in this process, which warns that the cassette's model is retired
# (claude-3-7-sonnet-20250219, end of life 2026-02-19). It is the model whose redacted_thinking blocks are
# documented (Claude 4 models return none): see cassettes/README.md.
pytestmark = pytest.mark.filterwarnings(
    "ignore:The model 'claude-3-7-sonnet-20250219' is deprecated:DeprecationWarning"
)

# The string Claude 3.7 Sonnet answers with a redacted_thinking block (zed-industries/zed#33317).
ANTHROPIC_REDACTED_THINKING_TRIGGER = (
    "ANTHROPIC_MAGIC_STRING_TRIGGER_REDACTED_THINKING_46C9A13E193C177646C7398A98432ECCCE4C1253D5E2D82641AC0E52CC2876CB"
)

CONVERSATIONS = [
    Conversation(
        "openai",
        "openai_chat.json",
        [
            [text("What fruit is in this photo? Check the glossary."), image()],
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
        ],
    ),
    Conversation(
        "anthropic",
        "anthropic.json",
        [
            [text("What is the latest news about the kumquat harvest? Search the web, then save the headline as CSV.")],
            [text(f"{ANTHROPIC_REDACTED_THINKING_TRIGGER} Which fruit is in this photo? Look it up."), image()],
            [text("What does my price list say about loquats?"), pdf()],
        ],
    ),
    Conversation(
        "gemini",
        "gemini.json",
        [
            [text("What fruit is this? Look it up in the glossary."), image()],
            [text("How much do 7 kumquats of 23 g weigh (use code), and when are they in season in Florida?")],
            [text("Here is my price list. Look loquats up in the glossary too."), pdf()],
        ],
    ),
    Conversation(
        "gemini-minted-ids",
        "gemini_minted_ids.json",
        [[text("What is a kumquat? Check the glossary.")], [text("And a loquat?")]],
    ),
]
BY_NAME = {c.name: c for c in CONVERSATIONS}
BYTE_IDENTICAL = ["openai", "openai-responses", "anthropic", "gemini"]

EXCLUDED_HEADERS: frozenset[str] = frozenset()
"""Request headers left out of the comparison: none. Retry counts, timeouts, user agents and content lengths
come out the same in every run (no request is retried, the SDKs and the bodies are the same), so every header
is compared; a retried request would differ in ``x-stainless-retry-count`` and fail this on purpose."""

Played = dict[tuple[str, str], Run | BaseException]


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Played:
    """Every conversation in both modes, played once for the module (concurrently, bounded: see play_all)."""
    return asyncio.run(play_all(CONVERSATIONS, tmp_path_factory.mktemp("providers")))


def run_of(played: Played, name: str, mode: str) -> Run:
    result = played[(name, mode)]
    if isinstance(result, BaseException):
        raise AssertionError(f"the {mode} run of {name} failed: {result!r}") from result
    assert result.stop_reasons == ["end_turn"] * len(BY_NAME[name].turns), (result.stop_reasons, result.files.stderr())
    # Nothing on stderr: no traceback, no warning (a dropped content block, a pydantic serialization warning).
    assert result.files.stderr() == "", result.files.stderr()
    return result


def cassette_bodies(name: str) -> list[Any]:
    return [i["response"]["body"] for i in load_cassette(CASSETTES / BY_NAME[name].cassette)["interactions"]]


def headers(request: dict[str, Any]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in request["headers"] if k.lower() not in EXCLUDED_HEADERS]


# -- the proof -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", BYTE_IDENTICAL)
def test_every_request_after_restarts_is_byte_identical_to_the_one_without(played: Played, name: str) -> None:
    reference, restart = run_of(played, name, "memory"), run_of(played, name, "restart")
    expected = len(cassette_bodies(name))
    assert len(reference.requests) == len(restart.requests) == expected, "the whole cassette, no more, no less"
    assert restart.answers == reference.answers  # and the client was told the same things
    restarted = set(restart.first_request_of_turn[1:])
    for index, (ours, theirs) in enumerate(zip(reference.requests, restart.requests, strict=True)):
        where = f"{name}, request {index + 1}" + (" (the first a restarted process sent)" if index in restarted else "")
        assert (theirs["method"], theirs["path"]) == (ours["method"], ours["path"]), where
        ours_body, theirs_body = reference.bodies()[index], restart.bodies()[index]
        assert theirs_body == ours_body, f"{where}: the body differs\n{describe_difference(ours_body, theirs_body)}"
        assert headers(theirs) == headers(ours), where
    # Every turn after the first was served by a new process: turn 2's after a session/load that replayed the
    # session to the client, turn 3's after a session/resume.
    assert restart.first_request_of_turn == reference.first_request_of_turn
    assert len(restarted) == len(BY_NAME[name].turns) - 1
    assert restart.replays and all(kinds and kinds[0] == "user_message_chunk" for kinds in restart.replays)


def test_minted_gemini_call_ids_are_the_only_difference_and_survive_a_restart(played: Played) -> None:
    """Gemini function calls without an id: AG2 mints ``str(uuid4())`` for each when the response arrives.

    So no two runs send the same bytes, and that is AG2's doing, not the storage's. What the storage owes is the
    minted id itself. The id minted by turn 1's process reaches the provider unchanged from turn 2's process
    (after SIGKILL and session/load), and with each run's minted ids paired in order of appearance, the bodies
    are byte-identical to the reference's.
    """
    reference, restart = run_of(played, "gemini-minted-ids", "memory"), run_of(played, "gemini-minted-ids", "restart")
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
    assert len(ours) == len(theirs) == 2  # one per function call in the cassette, which gives none an id
    assert all(UUID(value).version == 4 for value in ours + theirs)
    assert not set(ours) & set(theirs)

    # Turn 1's id is in every request from the one answering its call on (the call and its response: twice),
    # the requests of turn 2's process included.
    counts = [body.count(theirs[0].encode()) for body in restart.bodies()]
    assert counts == [0, 2, 2, 2], counts
    assert restart.first_request_of_turn == [0, 2]

    for index, (a, b) in enumerate(zip(reference.bodies(), restart.bodies(), strict=True)):
        for mine, other in zip(ours, theirs, strict=True):
            b = b.replace(other.encode(), mine.encode())
        assert b == a, f"request {index + 1}: beyond the minted ids\n{describe_difference(a, b)}"
        assert headers(restart.requests[index]) == headers(reference.requests[index])


# -- what the requests carry: the comparison above is worth something only if these are in them --------------------

CONTENT_MODES = ["memory", "restart"]
"""The reference shows the conversation exercises what it claims; the restart run, that the model is sent it
by processes started after a SIGKILL (byte-identical anyway, by the test above, when that passes)."""


def png_b64() -> str:
    return base64.b64encode(PNG).decode()


def pdf_b64() -> str:
    return base64.b64encode(PDF).decode()


def input_items(body: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [item for item in body["input"] if item.get("type") == kind]


@pytest.mark.parametrize("mode", CONTENT_MODES)
def test_openai_responses_requests_carry_reasoning_web_search_and_calls(played: Played, mode: str) -> None:
    run = run_of(played, "openai-responses", mode)
    bodies = run.json_bodies()
    cassette = cassette_bodies("openai-responses")
    assert bodies[0]["include"] == ["web_search_call.action.sources", "reasoning.encrypted_content"]
    first, web_search, second = cassette[0]["output"][:3]
    third = cassette[1]["output"][0]

    turn2 = bodies[run.first_request_of_turn[1]]  # in the restart run: after a SIGKILL and session/load
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
    assert turn2["input"][-1]["content"] == [{"type": "input_image", "image_url": f"data:image/png;base64,{png_b64()}"}]

    turn3 = bodies[run.first_request_of_turn[2]]  # in the restart run: after a SIGKILL and session/resume
    assert [r["id"] for r in input_items(turn3, "reasoning")] == [first["id"], second["id"], third["id"]]
    assert input_items(turn3, "reasoning")[2]["encrypted_content"] == third["encrypted_content"]
    (call,) = input_items(turn3, "function_call")
    assert (call["call_id"], call["name"], call["arguments"]) == (
        "call_Vd8nJ2kQ5wR1tY7uP3sL0mXa",
        "lookup",
        '{"word":"loquat"}',
    )
    (output,) = input_items(turn3, "function_call_output")
    assert output["call_id"] == call["call_id"] and "rose family" in output["output"]
    files = [p for m in turn3["input"] if m.get("role") == "user" for p in m["content"] if p["type"] == "input_file"]
    assert files == [
        {"type": "input_file", "file_data": f"data:application/pdf;base64,{pdf_b64()}", "filename": "file.pdf"}
    ]


@pytest.mark.parametrize("mode", CONTENT_MODES)
def test_anthropic_requests_carry_redacted_thinking_server_tools_and_calls(played: Played, mode: str) -> None:
    run = run_of(played, "anthropic", mode)
    bodies = run.json_bodies()
    cassette = cassette_bodies("anthropic")

    def blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
        return [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]

    turn2 = blocks(bodies[run.first_request_of_turn[1]])  # in the restart run: after a SIGKILL and session/load
    search_use, search_result, code_use, code_result = cassette[0]["content"][2:6]
    server_blocks = [
        b
        for b in turn2
        if b["type"] in ("server_tool_use", "web_search_tool_result", "bash_code_execution_tool_result")
    ]
    # As the API sent them, less the null page_age AG2's dump leaves out (exclude_none).
    search_result = {
        **search_result,
        "content": [{k: v for k, v in r.items() if v is not None} for r in search_result["content"]],
    }
    assert server_blocks == [search_use, search_result, code_use, code_result]
    assert not [b for b in turn2 if b["type"] == "container_upload"]  # stored, never replayed (the API refuses it)
    # AG2 1.2.1 turns a thinking block into a transient ModelReasoning: neither it nor its signature is ever
    # stored or sent back, with or without a restart. If a release starts replaying them, this says so.
    assert not [b for b in turn2 if b["type"] == "thinking"]
    assert {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": png_b64()},
        "cache_control": {"type": "ephemeral"},
    } in turn2

    turn3 = blocks(bodies[run.first_request_of_turn[2]])  # in the restart run: after a SIGKILL and session/resume
    (redacted,) = [b for b in turn3 if b["type"] == "redacted_thinking"]
    assert redacted == cassette[1]["content"][0]
    (use,) = [b for b in turn3 if b["type"] == "tool_use"]
    assert use == cassette[1]["content"][2]
    (result,) = [b for b in turn3 if b["type"] == "tool_result"]
    assert result["tool_use_id"] == use["id"] and "glossary entry 7" in result["content"]
    (document,) = [b for b in turn3 if b["type"] == "document"]
    assert document["source"] == {"type": "base64", "media_type": "application/pdf", "data": pdf_b64()}


@pytest.mark.parametrize("mode", CONTENT_MODES)
def test_gemini_requests_carry_thought_signatures_code_execution_and_calls(played: Played, mode: str) -> None:
    run = run_of(played, "gemini", mode)
    bodies = run.json_bodies()
    cassette = [body["candidates"][0]["content"]["parts"] for body in cassette_bodies("gemini")]

    def parts(body: dict[str, Any]) -> list[dict[str, Any]]:
        return [p for c in body["contents"] for p in c["parts"]]

    def signature(part: dict[str, Any]) -> bytes:
        # The API sends standard base64; the SDK decodes it to bytes and sends it back URL-safe.
        return base64.urlsafe_b64decode(part["thoughtSignature"])

    kumquat = cassette[0][0]
    turn2 = parts(bodies[run.first_request_of_turn[1]])  # in the restart run: after a SIGKILL and session/load
    (call,) = [p for p in turn2 if "functionCall" in p]
    assert call["functionCall"] == {"id": "kq7v2m9x", "args": {"word": "kumquat"}, "name": "lookup"}
    assert signature(call) == base64.b64decode(kumquat["thoughtSignature"])
    (response,) = [p for p in turn2 if "functionResponse" in p]
    assert response["functionResponse"]["id"] == "kq7v2m9x"
    assert turn2[1] == {"inlineData": {"data": base64.urlsafe_b64encode(PNG).decode(), "mime_type": "image/png"}}

    turn3 = parts(bodies[run.first_request_of_turn[2]])  # in the restart run: after a SIGKILL and session/resume
    assert [p for p in turn3 if "executableCode" in p or "codeExecutionResult" in p] == cassette[2][:2]
    assert [signature(p) for p in turn3 if "thoughtSignature" in p] == [base64.b64decode(kumquat["thoughtSignature"])]
    assert "grounding" not in json.dumps(turn3).lower()  # grounding is stored, never replayed
    assert turn3[-1]["inlineData"]["mime_type"] == "application/pdf"
    after_tool = parts(bodies[run.first_request_of_turn[2] + 1])
    loquat = [p for p in after_tool if "thoughtSignature" in p][-1]
    assert loquat["functionCall"]["id"] == "lq3n8c1z"
    assert signature(loquat) == base64.b64decode(cassette[3][0]["thoughtSignature"])


@pytest.mark.parametrize("mode", CONTENT_MODES)
def test_openai_chat_requests_carry_calls_and_files(played: Played, mode: str) -> None:
    run = run_of(played, "openai", mode)
    bodies = run.json_bodies()
    turn2 = bodies[run.first_request_of_turn[1]]["messages"]  # in the restart run: after a SIGKILL and session/load
    assert [m["role"] for m in turn2] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert turn2[1]["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png_b64()}"}}
    assert turn2[2]["tool_calls"][0]["id"] == turn2[3]["tool_call_id"] == "call_Qm3xV8rT2pL6nY0wK4sJ9dHc"
    assert turn2[5]["content"][1] == {
        "type": "file",
        "file": {"file_data": f"data:application/pdf;base64,{pdf_b64()}", "filename": "file.pdf"},
    }
    turn3 = bodies[run.first_request_of_turn[2]]["messages"]  # in the restart run: after a SIGKILL and session/resume
    (two_calls,) = [m for m in turn3 if len(m.get("tool_calls") or []) == 2]
    ids = [c["id"] for c in two_calls["tool_calls"]]
    assert ids == ["call_Kq2wE4rT6yU8iO0pA1sD3fGh", "call_Lz9xC7vB5nM3qW1eR2tY4uIo"]
    assert [m["tool_call_id"] for m in turn3 if m["role"] == "tool"][-2:] == ids
    assert turn3[-1] == {"role": "user", "content": "Thanks, that is all."}


# -- what the file holds: the events no request shows ---------------------------------------------------------------


async def stored_events(run: Run) -> list[Any]:
    """The session's events as a later process reads them back from the file."""
    from sessionstore import SQLiteStorage
    from sessionstore.ag2 import AG2Codec

    async with SQLiteStorage(run.files.db, codec=AG2Codec()) as storage:
        return list(await storage.get_history(UUID(hex=run.session_id)))


def of_class(events: list[Any], name: str) -> list[Any]:
    return [e for e in events if type(e).__name__ == name]


@pytest.mark.parametrize("name", [*BYTE_IDENTICAL, "gemini-minted-ids"])
def test_no_stored_event_is_left_unknown(played: Played, name: str) -> None:
    """An event the codec could not read back would come back as AG2's UnknownEvent, which the mappers skip in
    silence: for one never replayed (grounding, a container upload, usage), no request body would show it."""
    from ag2.events import UnknownEvent

    events = asyncio.run(stored_events(run_of(played, name, "restart")))
    assert events and not [e for e in events if isinstance(e, UnknownEvent)]


def test_stored_provider_events_keep_what_is_never_replayed(played: Played) -> None:
    """Read back after the SIGKILLs, the provider events hold what their responses said, replayed or not."""
    responses = asyncio.run(stored_events(run_of(played, "openai-responses", "restart")))
    cassette = cassette_bodies("openai-responses")
    reasoning = of_class(responses, "OpenAIReasoningEvent")  # one per summary part, one for an item without any
    assert [e.item.id for e in reasoning] == [cassette[0]["output"][i]["id"] for i in (0, 0, 2)] + [
        cassette[1]["output"][0]["id"],
        cassette[3]["output"][0]["id"],
    ]
    (search,) = of_class(responses, "OpenAIServerToolCallEvent")
    api_source = search.item.action.sources[2]
    assert (api_source.type, api_source.name, api_source.url) == ("api", "oai-weather", None)
    (result,) = of_class(responses, "OpenAIServerToolResultEvent")
    assert [p.url for p in result.result.parts] == [s["url"] for s in cassette[0]["output"][1]["action"]["sources"][:2]]

    anthropic = asyncio.run(stored_events(run_of(played, "anthropic", "restart")))
    (upload,) = of_class(anthropic, "AnthropicContainerUploadEvent")
    assert upload.file_id == "file_011CNha8iCJcU1wXNR6q4V8w"
    search_result, code_result = of_class(anthropic, "AnthropicServerToolResultEvent")
    assert [p.metadata["page_age"] for p in search_result.result.parts] == ["November 18, 2026", None]
    assert [getattr(p, "file_id", None) for p in code_result.result.parts] == [None, "file_011CNha8iCJcU1wXNR6q4V8w"]

    gemini = asyncio.run(stored_events(run_of(played, "gemini", "restart")))
    grounding = cassette_bodies("gemini")[2]["candidates"][0]["groundingMetadata"]
    grounded = [e for e in of_class(gemini, "GeminiServerToolCallEvent") if e.grounding_metadata is not None]
    assert [e.grounding_metadata.web_search_queries for e in grounded] == [grounding["webSearchQueries"]]
    chunks = grounded[0].grounding_metadata.grounding_chunks
    assert [c.web.uri for c in chunks] == [c["web"]["uri"] for c in grounding["groundingChunks"]]
    answered = [e for e in of_class(gemini, "GeminiServerToolResultEvent") if e.grounding_metadata is not None]
    assert [p.url for p in answered[0].result.parts] == [c["web"]["uri"] for c in grounding["groundingChunks"]]
    calls = [c for e in of_class(gemini, "ModelResponse") for c in e.tool_calls.calls]
    assert [(type(c).__name__, c.id) for c in calls] == [
        ("GeminiToolCallEvent", "kq7v2m9x"),
        ("GeminiToolCallEvent", "lq3n8c1z"),
    ]
    recorded = cassette_bodies("gemini")
    signatures = [
        base64.b64decode(recorded[i]["candidates"][0]["content"]["parts"][0]["thoughtSignature"]) for i in (0, 3)
    ]
    assert [c.thought_signature for c in calls] == signatures


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
