"""The parity check shared by the q/k capture tests of every backend: replayed rows equal an eager-attention
reference within 1e-4, and the AlignAtt scan decides the same on both for several borders and frontiers."""
from policies.alignatt import AlignAttParams, scan_draft


def assert_replay_matches_reference(replayed, reference, prompt, tolerance: float = 1e-4) -> None:
    assert replayed.shape == reference.shape
    assert (replayed - reference).abs().max().item() < tolerance
    for border in (-3, -1, 0, 1):
        for accessible in (prompt.word_count // 2, prompt.word_count):
            params = AlignAttParams(border=border, median_width=3)
            ours = scan_draft(replayed.numpy(), prompt.source_token_word, accessible, params)
            theirs = scan_draft(reference.numpy(), prompt.source_token_word, accessible, params)
            assert ours.accepted_tokens == theirs.accepted_tokens
            assert [d.source_word for d in ours.decisions] == [d.source_word for d in theirs.decisions]
