"""LocalAgreement-n: the longest prefix the last n hypotheses share."""
from policies.local_agreement import agreed_prefix


def test_agreed_prefix():
    assert agreed_prefix([["a", "b", "c"]]) == 0  # one hypothesis agrees with nothing yet
    assert agreed_prefix([["a", "b", "c"], ["a", "b", "d"]]) == 2
    assert agreed_prefix([["a", "b"], ["a", "b", "c"]]) == 2
    assert agreed_prefix([["x"], ["a"]]) == 0
    assert agreed_prefix([["a", "b", "c"], ["a", "b", "c"], ["a", "c"]]) == 1
