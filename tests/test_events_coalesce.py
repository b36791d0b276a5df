"""The publisher joins token deltas that queued up behind one another, and nothing else."""

from support.live.events import coalesce

A = ["conversation.a", "staff.conversation.a"]
B = ["conversation.b", "staff.conversation.b"]


def delta(groups, text, run="r1", seq=5, n=0):
    return groups, {"type": "desk.event", "id": f"id{n}{text}",
                    "event": {"type": "token.delta", "run": run, "seq": seq, "text": text}}


def other(groups, kind="step.finished"):
    return groups, {"type": "desk.event", "id": kind, "event": {"type": kind}}


def texts(batch):
    return [(m["event"]["type"], m["event"].get("text")) for _, m in batch]


def test_consecutive_deltas_of_one_reply_become_one_event():
    out = coalesce([delta(A, "Hel"), delta(A, "lo"), delta(A, " there")])
    assert texts(out) == [("token.delta", "Hello there")]
    assert out[0][0] == A and out[0][1]["id"] == "id0Hel"  # the first delta's id and groups


def test_an_event_for_the_same_groups_keeps_its_place_between_deltas():
    out = coalesce([delta(A, "a"), other(["staff.conversation.a", "staff"]), delta(A, "b")])
    assert texts(out) == [("token.delta", "a"), ("step.finished", None), ("token.delta", "b")]


def test_other_conversations_do_not_split_a_reply_and_are_not_joined_to_it():
    out = coalesce([delta(A, "a"), delta(B, "x"), other(B), delta(A, "b"), delta(B, "y")])
    assert texts(out) == [("token.delta", "ab"), ("token.delta", "x"), ("step.finished", None),
                          ("token.delta", "y")]
    assert [g for g, _ in out] == [A, B, B, B]


def test_a_reset_is_never_joined_and_ends_the_reply_before_it():
    out = coalesce([delta(A, "half"), delta(A, ""), delta(A, "whole"), delta(A, " reply")])
    assert texts(out) == [("token.delta", "half"), ("token.delta", ""), ("token.delta", "whole reply")]


def test_a_new_reply_starts_a_new_delta():
    out = coalesce([delta(A, "one", seq=5), delta(A, "two", seq=7), delta(A, "x", run="r2", seq=7)])
    assert texts(out) == [("token.delta", "one"), ("token.delta", "two"), ("token.delta", "x")]


def test_the_input_is_not_changed():
    batch = [delta(A, "a"), delta(A, "b")]
    coalesce(batch)
    assert texts(batch) == [("token.delta", "a"), ("token.delta", "b")]


def test_a_copilot_runs_deltas_are_joined_too_and_never_with_the_agents():
    staff = ["staff.conversation.a"]

    def copilot(text, run="c1", n=0):
        return staff, {"type": "desk.event", "id": f"c{n}{text}",
                       "event": {"type": "copilot.delta", "copilot": run, "kind": "draft", "text": text}}

    out = coalesce([copilot("Dear"), copilot(" Maya"), delta(staff, "Hi"), copilot(",", run="c2"), copilot("!")])
    assert texts(out) == [("copilot.delta", "Dear Maya"), ("token.delta", "Hi"), ("copilot.delta", ","),
                          ("copilot.delta", "!")]
