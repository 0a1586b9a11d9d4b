"""The benchmark's draws (kgen.bench.calls.random_matmul_shapes, random_reduce_lengths):
reproducible from the seed, within the ranges they state, with --multiple model-layer sides,
and the command's checks of what it is given."""
import pytest

from kgen.bench.calls import main, random_matmul_shapes


def test_a_seed_gives_the_same_draw_and_another_seed_another():
    assert random_matmul_shapes(12, 7, (1, 16)) == random_matmul_shapes(12, 7, (1, 16))
    assert random_matmul_shapes(12, 7, (1, 16)) != random_matmul_shapes(12, 8, (1, 16))


def test_few_row_draws_keep_to_their_rows_and_sides():
    for M, N, K in random_matmul_shapes(200, 3, (17, 256)):
        assert 17 <= M <= 256
        assert 1024 <= N < 16384 and 1024 <= K < 16384
    # Half of N odd as drawn, and a third more made odd (2/3 in all): rows of such a weight
    # are not 16-byte aligned.
    odd = sum(N % 2 for _, N, _ in random_matmul_shapes(300, 5, (1, 16)))
    assert 160 <= odd <= 240


@pytest.mark.parametrize("multiple", [8, 64, 128])
def test_multiple_rounds_n_and_k_up_and_keeps_the_rows(multiple):
    plain = random_matmul_shapes(100, 11, (1, 256))
    rounded = random_matmul_shapes(100, 11, (1, 256), multiple)
    assert len(rounded) == len(plain)
    for (M, N, K), (M2, N2, K2) in zip(plain, rounded):
        assert M2 == M
        assert N2 % multiple == 0 and K2 % multiple == 0
        # Rounded up from what was drawn (before a third of N was made odd).
        assert (N | 1) - 1 <= N2 < N + multiple and K <= K2 < K + multiple


def test_multiple_must_be_positive():
    with pytest.raises(ValueError, match="multiple=0"):
        random_matmul_shapes(4, 1, None, 0)
    with pytest.raises(SystemExit, match="--multiple"):
        main(["matmul", "--random", "4", "--multiple", "0"])


def test_build_ways_reports_a_variant_that_does_not_build_and_keeps_the_others():
    from kgen.bench.skinny import build_ways, format_ways

    def build(spec):
        if spec == "bad":
            raise ValueError("rows=129: an integer from 1 to 128")
        return spec.upper

    row: dict = {}
    ways = build_ways(build, {"a": "good", "b": "bad"}, row)
    assert list(ways) == ["a"] and "rows=129" in row["b_error"]
    row.update(a_dev=12.34, a_one=20.0)
    assert format_ways(row, ["a", "b"]) == "a   12.3/  20.0  b    nan/   nan"


def test_fresh_inputs_reach_the_benchmark(monkeypatch):
    import kgen.bench.calls as calls

    seen = {}

    def fake(shapes, dtype, tf32, weights, fresh, batch):
        seen.update(shapes=shapes, fresh=fresh, weights=weights, batch=batch)
        return {"summary": {}, "rows": []}

    monkeypatch.setattr(calls, "bench_matmul", fake)
    assert main(["matmul", "--shapes", "3x4096x4096", "--weights", "--fresh-inputs"]) == 0
    assert seen == {"shapes": [(3, 4096, 4096)], "fresh": True, "weights": True, "batch": 1}
    assert main(["matmul", "--shapes", "3x4096x4096", "--batch", "2"]) == 0
    assert seen["fresh"] is False and seen["batch"] == 2
    with pytest.raises(SystemExit, match="--batch: 0"):
        main(["matmul", "--shapes", "3x4096x4096", "--batch", "0"])


def test_a_wrong_result_fails_the_benchmark_and_is_named(monkeypatch, tmp_path):
    """kgen bench calls: a product whose result failed its check against float64 is listed
    in the summary, and the command exits 1 (after writing its JSON); correct ones pass."""
    import json

    import kgen.bench.calls as calls

    def row(shape, correct):
        return {"shape": shape, "flops": 2.0 * shape[0] * shape[1] * shape[2], "speed_x": 1.2, "correct": correct}

    good, bad = row([774, 47, 1715], True), row([608, 16, 1119], False)
    summary = calls.summarize([good, bad])
    assert summary["wrong"] == [[608, 16, 1119]] and summary["all"]["count"] == 2
    assert calls.summarize([good])["wrong"] == []
    out = tmp_path / "r.json"
    for rows, rc in (([good, bad], 1), ([good], 0)):
        result = {"summary": calls.summarize(rows), "rows": rows}
        monkeypatch.setattr(calls, "bench_matmul", lambda *a, result=result: result)
        assert main(["matmul", "--shapes", "774x47x1715", "--json", str(out)]) == rc
        assert json.loads(out.read_text())["summary"]["wrong"] == [r["shape"] for r in rows if not r["correct"]]
    for wrong, rc in ((["sum n=33554433"], 1), ([], 0)):
        reduced = {"summary": {"sum": {"geomean_x": 1.1, "min_x": 1.0}, "wrong": wrong}, "rows": []}
        monkeypatch.setattr(calls, "bench_reduce", lambda *a, reduced=reduced: reduced)
        assert main(["reduce", "--lengths", "33554433"]) == rc


def test_few_column_draws_mirror_the_few_row_draws():
    rows = random_matmul_shapes(60, 21, (1, 16), 64)
    cols = random_matmul_shapes(60, 21, (1, 16), 64, columns=True)
    assert cols == [(N, M, K) for M, N, K in rows]
    plain = random_matmul_shapes(300, 5, (1, 16), columns=True)
    assert all(1 <= N <= 16 and 1024 <= M < 16384 and 1024 <= K < 16384 for M, N, K in plain)
    # A third of K made odd (A's rows are then not 16-byte aligned), on top of half as drawn.
    assert 160 <= sum(K % 2 for _, _, K in plain) <= 240
    with pytest.raises(ValueError, match="columns=True"):
        random_matmul_shapes(4, 1, None, 1, columns=True)
    with pytest.raises(SystemExit, match="--columns"):
        main(["matmul", "--random", "4", "--columns"])


def test_reduce_length_draws_are_reproducible_and_spread_over_the_octaves():
    from kgen.bench.calls import REDUCE_MAX_LENGTH, random_reduce_lengths

    draw = random_reduce_lengths(300, 9)
    assert draw == random_reduce_lengths(300, 9) and draw != random_reduce_lengths(300, 10)
    assert all(1 <= n <= REDUCE_MAX_LENGTH for n in draw)
    # Log-uniform over 28 octaves: about a tenth below 2^3 and a tenth above 2^25.
    assert 10 <= sum(n < 2 ** 3 for n in draw) <= 60 and 10 <= sum(n > 2 ** 25 for n in draw) <= 60
    # About half odd as drawn (154 of these 300) and a third made odd: 194.
    assert 175 <= sum(n % 2 for n in draw) <= 240
    assert all(n <= 100 for n in random_reduce_lengths(50, 3, hi=100))
    with pytest.raises(ValueError, match="hi=0"):
        random_reduce_lengths(3, 1, hi=0)


def test_reduce_bench_takes_drawn_and_given_lengths_and_names_bad_ones(monkeypatch):
    import kgen.bench.calls as calls

    seen = {}

    def fake(lengths, dtype):
        seen.update(lengths=lengths, dtype=dtype)
        return {"summary": {}, "rows": []}

    monkeypatch.setattr(calls, "bench_reduce", fake)
    assert main(["reduce", "--lengths", "7,1048576", "--random", "3", "--seed", "4", "--dtype", "float64"]) == 0
    assert seen == {"lengths": [7, 1048576, *calls.random_reduce_lengths(3, 4)], "dtype": "float64"}
    assert main(["reduce", "--lengths", "5"]) == 0 and seen["lengths"] == [5]
    for bad in ("12,abc", "0", "3,-2"):
        with pytest.raises(SystemExit, match="--lengths"):
            main(["reduce", "--lengths", bad])
    with pytest.raises(SystemExit, match="--random N"):
        main(["reduce"])
    with pytest.raises(SystemExit, match="--dtype bfloat16: kgen.dot and kgen.reduce take float32 or float64"):
        main(["reduce", "--lengths", "5", "--dtype", "bfloat16"])
