"""Would a compiled decoding step close the gap? One greedy step eager, ``torch.compile``d and
compiled ahead of time, at a few rows and at many (issue #29).

    python bench/compiled_step.py --checkpoint runs/multi30k-small/checkpoints/best.ckpt \\
        [--aot /tmp/aot-m30] [--whole 5] [--dynamic] [--threads 1,2] [--steps 30] [--repeats 3]

The step is written once as a function of fixed-shape tensors (the decoder of
:class:`~minitrans.transformer.Transformer` for one new token per row, bf16 weights, a float32
key/value cache of ``capacity`` positions written in place at the step's position and masked
beyond it, the cross-attention keys/values of the batch's encoder output, the log-softmax over
the vocabulary), so that one compilation can serve every step. It is checked against the
engine's own step (``search._Stepper.log_probs``) on a batch's first three steps, then timed as
it is (eager: the engine's operators less its module calls), compiled by ``torch.compile``
(``fullgraph``, Inductor with weight freezing: the matrices laid out for oneDNN, the element-wise
work fused into generated C++ loops; one compilation per batch shape, or one with ``--dynamic``),
and with ``--aot DIR`` exported with every size symbolic and compiled ahead of time by
AOTInductor into ``DIR/step.pt2`` (the form that could ship beside a checkpoint: built once,
loaded in milliseconds). Reported: milliseconds a step (median of ``--repeats`` runs of
``--steps`` steps) against the engine's, and the seconds each compilation took. Two batches of
the 1,000 ``test_2016_flickr`` sentences, as ``bench/step_cost.py`` takes them: the 25 longest
sources and the 428 shortest. ``--whole N`` then decodes all 1,000 sentences greedily N times,
alternating the engine's search with a plain greedy loop around the ahead-of-time step (the
engine's batches, length limits and rule for dropping finished rows, its prepacked encoder).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--few", type=int, default=25)
    parser.add_argument("--many", type=int, default=428)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--aot", metavar="DIR", default=None,
                        help="also export the step (torch.export, dynamic shapes) and compile it ahead of "
                             "time with AOTInductor into DIR/step.pt2; report the seconds to build and to load it")
    parser.add_argument("--whole", type=int, default=0, metavar="ROUNDS",
                        help="with --aot: then decode all 1,000 sentences greedily with the engine and with a "
                             "plain greedy loop around the ahead-of-time step (same batches, no compaction), "
                             "ROUNDS alternated rounds on the last --threads count")
    parser.add_argument("--dynamic", action="store_true",
                        help="one compilation for every shape (rows, cache capacity, source length), "
                             "made before the first batch; default: one per batch shape")
    args = parser.parse_args()
    if args.whole and not args.aot:
        parser.error("--whole decodes with the ahead-of-time step: give --aot DIR too")
    from minitrans.runtime import tune_allocator

    tune_allocator(force=True)
    import torch
    import torch._inductor.config as inductor_config

    from minitrans import search
    from minitrans.batching import pad
    from minitrans.checkpoint import load_for_inference
    from minitrans.evaluate import load_eval_data
    from minitrans.masks import padding_mask
    from minitrans.native_engine import NativeEngine
    from minitrans.vocab import BOS_ID, EOS_ID

    inductor_config.freezing = True
    model, tokenizer, _ = load_for_inference(args.checkpoint)
    engine = NativeEngine(model, precision="auto")  # bf16 where the CPU has the units; prepacked
    reference = engine.model
    plain, _, _ = load_for_inference(args.checkpoint)  # unpacked weights for the functional step
    plain = plain.to(reference.tgt_embed.weight.dtype).eval()
    cfg = plain.config
    heads, d = cfg.n_heads, cfg.d_model
    dh = d // heads
    layers = plain.decoder.layers
    dtype = plain.tgt_embed.weight.dtype

    def positions(pos):
        """The position rows added to the embedded token (sinusoidal table, or learned)."""
        pe = plain.tgt_pos.learned(pos) if plain.tgt_pos.learned is not None else plain.tgt_pos.table.index_select(0, pos)
        return pe.to(dtype)  # (1, D)

    def step(tok, pos, self_k, self_v, cross_k, cross_v, source_add):
        """tok (R,), pos (1,) long; self_k/v: per layer (R, H, C, Dh) float32, written at pos;
        cross_k/v: per layer (R, H, S, Dh) float32; source_add (R, 1, 1, S) float32 (0 / -inf)."""
        rows, capacity = tok.size(0), self_k[0].size(2)
        x = plain.tgt_embed(tok) * math.sqrt(d) + positions(pos)  # (R, D)
        x = x.unsqueeze(1)  # (R, 1, D)
        seen = torch.arange(capacity) <= pos  # (C,)
        self_add = torch.zeros(capacity).masked_fill(~seen, float("-inf"))  # (C,)

        def attend(q, keys, values, add):
            scores = torch.matmul(q.float(), keys.transpose(-2, -1)) * dh ** -0.5 + add  # (R, H, 1, L)
            return torch.matmul(torch.softmax(scores, dim=-1), values)  # (R, H, 1, Dh)

        def heads_of(t):
            return t.view(rows, 1, heads, dh).transpose(1, 2)  # (R, H, 1, Dh)

        def merged(t, dtype):
            return t.transpose(1, 2).reshape(rows, 1, d).to(dtype)

        for i, layer in enumerate(layers):
            sa, ca, ff = layer.self_attn, layer.cross_attn, layer.feed_forward
            pre = layer.self_block.norm_first

            def self_part(h):
                q, k, v = sa.q_proj(h), sa.k_proj(h), sa.v_proj(h)
                self_k[i].index_copy_(2, pos, heads_of(k).float())
                self_v[i].index_copy_(2, pos, heads_of(v).float())
                return sa.out_proj(merged(attend(heads_of(q), self_k[i], self_v[i], self_add), h.dtype))

            def cross_part(h):
                return ca.out_proj(merged(attend(heads_of(ca.q_proj(h)), cross_k[i], cross_v[i], source_add), h.dtype))

            for block, part in ((layer.self_block, self_part), (layer.cross_block, cross_part),
                                (layer.ff_block, ff)):
                x = x + part(block.norm(x)) if pre else block.norm(x + part(x))
        if plain.decoder.final_norm is not None:
            x = plain.decoder.final_norm(x)
        return torch.log_softmax(plain.project(x)[:, 0].float(), dim=-1)  # (R, V)

    sources, _ = load_eval_data("multi30k", "test_2016_flickr", None, None)
    pieces = sorted(tokenizer.encode(sources), key=len)
    print(f"{args.checkpoint}: {reference.tgt_embed.weight.dtype}, d_model {d}, {len(layers)} decoder layers; "
          f"ms a step, median of {args.repeats} runs of {args.steps} steps")
    compiled = aot = None
    for name, chosen in ((f"{args.few} longest sources", pieces[-args.few:]),
                         (f"{args.many} shortest sources", pieces[:args.many])):
        src = pad([p + [EOS_ID] for p in chosen])
        rows, capacity = src.size(0), args.steps + 2
        with torch.inference_mode():
            mask = padding_mask(src, cfg.pad_id)  # (R, 1, 1, S)
            memory = plain.encode(src, mask)
            source_add = torch.zeros(mask.shape).masked_fill(~mask, float("-inf"))
            cross_k = [heads_of_memory(layer.cross_attn.k_proj(memory), heads) for layer in layers]
            cross_v = [heads_of_memory(layer.cross_attn.v_proj(memory), heads) for layer in layers]

            def fresh():
                return ([torch.zeros(rows, heads, capacity, dh) for _ in layers],
                        [torch.zeros(rows, heads, capacity, dh) for _ in layers])

            # The engine's own greedy steps give the tokens fed to both (and the reference output).
            stepper = search._Stepper(reference, reference.encode(src, mask), mask, True, capacity=capacity)
            prefix = torch.full((rows, 1), BOS_ID)
            engine_out = []
            for _ in range(3):
                out = stepper.log_probs(prefix, [])
                engine_out.append(out)
                prefix = torch.cat([prefix, out.argmax(-1, keepdim=True)], 1)
            self_k, self_v = fresh()
            mine = [step(prefix[:, t], torch.tensor([t]), self_k, self_v, cross_k, cross_v, source_add)
                    for t in range(3)]
            agree = statistics.mean(float((a.argmax(-1) == b.argmax(-1)).float().mean()) for a, b in zip(mine, engine_out))
            # The engine sets <pad> and <s> to -inf after its log-softmax; compare the other columns.
            diff = max(float((a - b)[:, torch.isfinite(b).all(0)].abs().max()) for a, b in zip(mine, engine_out))
        print(f"{name} ({rows} rows, source {src.size(1)} pieces): the functional step against the engine's, "
              f"first 3 steps: argmax equal {agree:.1%}, largest log-prob difference {diff:.3f}")
        if args.aot and aot is None:
            # Contiguous inputs of sizes unlike any fixed one: the package assumes the example's strides.
            example = [torch.zeros(rows, heads, 41, dh) for _ in range(2 * len(layers))]
            aot, build_s, load_s = ahead_of_time(step, (prefix[:, 0].contiguous(), torch.tensor([0]), example[:len(layers)],
                                                        example[len(layers):], cross_k, cross_v, source_add), args.aot)
            print(f"  AOTInductor: built in {build_s:.1f} s, loaded in {load_s:.2f} s")
        started = time.perf_counter()
        if not args.dynamic or compiled is None:
            compiled = torch.compile(step, fullgraph=True, dynamic=args.dynamic)
        with torch.no_grad():
            self_k, self_v = fresh()
            for t in range(2):  # the compilation, and its first call
                compiled(prefix[:, 0], torch.tensor([t]), self_k, self_v, cross_k, cross_v, source_add)
        compile_s = time.perf_counter() - started
        for kind, fn in (("compiled", compiled),) + ((("ahead-of-time", aot),) if aot else ()):
            with torch.no_grad():  # on the engine's first 3 steps (the cache written in place by each)
                self_k, self_v = fresh()
                theirs = [fn(prefix[:, t].contiguous(), torch.tensor([t]), self_k, self_v, cross_k, cross_v, source_add)
                          for t in range(3)]
                agree = statistics.mean(float((a.argmax(-1) == b.argmax(-1)).float().mean())
                                        for a, b in zip(theirs, engine_out))
                diff = max(float((a - b)[:, torch.isfinite(b).all(0)].abs().max()) for a, b in zip(theirs, engine_out))
            print(f"  {kind} step against the engine's, first 3 steps: argmax equal {agree:.1%}, "
                  f"largest log-prob difference {diff:.3f}")
        tokens = prefix[:, 1].contiguous()  # an ahead-of-time step takes its inputs' strides as exported
        for threads in (int(t) for t in args.threads.split(",")):
            torch.set_num_threads(threads)
            times = {"engine": [], "eager": [], "compiled": [], "aot": []}
            for _ in range(args.repeats):
                with torch.inference_mode():
                    stepper = search._Stepper(reference, reference.encode(src, mask), mask, True, capacity=capacity)
                    grow = torch.full((rows, 1), BOS_ID)
                    started = time.perf_counter()
                    for t in range(args.steps):
                        stepper.log_probs(grow, [])
                        grow = torch.cat([grow, tokens[:, None]], 1)
                    times["engine"].append((time.perf_counter() - started) / args.steps)
                for kind, fn in (("eager", step), ("compiled", compiled)) + ((("aot", aot),) if aot else ()):
                    with torch.no_grad():
                        self_k, self_v = fresh()
                        started = time.perf_counter()
                        for t in range(args.steps):
                            fn(tokens, torch.tensor([t]), self_k, self_v, cross_k, cross_v, source_add)
                        times[kind].append((time.perf_counter() - started) / args.steps)
            ms = {k: 1e3 * statistics.median(v) for k, v in times.items() if v}
            print(f"  {threads} thread(s): engine {ms['engine']:.2f} ms, functional eager {ms['eager']:.2f} ms, "
                  f"compiled {ms['compiled']:.2f} ms ({ms['engine'] / ms['compiled']:.2f}x the engine); "
                  f"compilation {compile_s:.1f} s" + (f"; ahead of time {ms['aot']:.2f} ms" if aot else "") + (" (dynamic shapes; at the second batch: its first two calls)" if args.dynamic else ""))

    if args.whole and aot is not None:
        ids = [p + [EOS_ID] for p in pieces[::-1]]  # any order: both cut the same length-sorted batches
        rates = {"engine": [], "ahead-of-time": []}
        for _ in range(args.whole):
            started = time.perf_counter()
            theirs = engine.search(ids, beam_size=1, alpha=1.0, nbest=1, max_len_a=search.DEFAULT_MAX_LEN_A,
                                   max_len_b=search.DEFAULT_MAX_LEN_B)
            rates["engine"].append(len(ids) / (time.perf_counter() - started))
            started = time.perf_counter()
            mine = greedy_run(reference, aot, ids, engine.max_tokens)
            rates["ahead-of-time"].append(len(ids) / (time.perf_counter() - started))
        same = sum(h[0].tokens == m for h, m in zip(theirs, mine)) / len(ids)
        print(f"whole greedy run, {len(ids)} sentences, {torch.get_num_threads()} thread(s), sentences/s by round: "
              + "; ".join(f"{k} " + ", ".join(f"{r:.1f}" for r in v) for k, v in rates.items())
              + f"; outputs identical to the engine's: {same:.1%}")


def greedy_run(model, step, ids, max_tokens):
    """Greedy search over ``ids`` (eos-terminated) with ``step`` for the decoder and ``model`` (the
    engine's, prepacked) for the encoder and the cross-attention keys/values: the engine's batches and length
    limits, the pieces the engine forbids (<pad>, <s>) forbidden, finished rows dropped as the
    engine drops them (once they are an eighth of the batch). Returns each sentence's tokens (no eos)."""
    import torch

    from minitrans import search
    from minitrans.batching import pad
    from minitrans.masks import padding_mask
    from minitrans.native_engine import token_batches
    from minitrans.vocab import BOS_ID, EOS_ID

    cfg = model.config
    heads, dh = cfg.n_heads, cfg.d_model // cfg.n_heads
    out = [None] * len(ids)
    with torch.inference_mode():
        for batch in token_batches(ids, max_tokens, 1):
            src = pad([ids[i] for i in batch])
            rows = src.size(0)
            mask = padding_mask(src, cfg.pad_id)
            memory = model.encode(src, mask)
            source_add = torch.zeros(mask.shape).masked_fill(~mask, float("-inf"))
            cross_k = [heads_of_memory(layer.cross_attn.k_proj(memory), heads) for layer in model.decoder.layers]
            cross_v = [heads_of_memory(layer.cross_attn.v_proj(memory), heads) for layer in model.decoder.layers]
            limits = search.max_output_lengths(src, search.DEFAULT_MAX_LEN_A, search.DEFAULT_MAX_LEN_B,
                                               cfg.max_len - 1, cfg.pad_id)
            capacity = int(limits.max()) + 1
            self_k = [torch.zeros(rows, heads, capacity, dh) for _ in model.decoder.layers]
            self_v = [torch.zeros(rows, heads, capacity, dh) for _ in model.decoder.layers]
            tok = torch.full((rows,), BOS_ID)
            alive = list(batch)  # the sentence of each row still decoded
            searching = torch.ones(rows, dtype=torch.bool)
            picked = {i: [] for i in batch}
            for t in range(int(limits.max())):
                logp = step(tok, torch.tensor([t]), self_k, self_v, cross_k, cross_v, source_add)
                logp[:, [cfg.pad_id, BOS_ID]] = float("-inf")
                tok = torch.where(limits == t + 1, EOS_ID, logp.argmax(-1))  # at its length limit: eos
                for i, token, on in zip(alive, tok.tolist(), searching.tolist()):
                    if on:
                        picked[i].append(token)
                searching &= tok != EOS_ID
                idle = len(alive) - int(searching.sum())
                if idle == len(alive):
                    break
                if idle >= search.COMPACT_SHARE * len(alive):  # the engine's rule: a copy of every cache
                    keep = searching.nonzero().flatten()
                    alive = [alive[j] for j in keep.tolist()]
                    tok, limits, source_add, searching = tok[keep], limits[keep], source_add[keep], searching[keep]
                    self_k, self_v = [x[keep] for x in self_k], [x[keep] for x in self_v]
                    cross_k, cross_v = [x[keep] for x in cross_k], [x[keep] for x in cross_v]
            for i in batch:
                tokens = picked[i]
                out[i] = tokens[:tokens.index(EOS_ID)] if EOS_ID in tokens else tokens
    return out


def ahead_of_time(step, example: tuple, folder: str):
    """``step`` exported with every size symbolic (rows, cache capacity, source length) and
    compiled by AOTInductor into ``folder/step.pt2``; returns the loaded callable and the
    seconds the build and the load took."""
    import os

    import torch
    from torch.export import Dim

    class Step(torch.nn.Module):
        def forward(self, tok, pos, self_k, self_v, cross_k, cross_v, source_add):
            return step(tok, pos, self_k, self_v, cross_k, cross_v, source_add)

    rows, capacity, source = Dim("rows", min=2, max=4096), Dim("capacity", min=2, max=1024), Dim("source", min=2, max=1024)
    layers = len(example[2])
    shapes = ({0: rows}, None, [{0: rows, 2: capacity}] * layers, [{0: rows, 2: capacity}] * layers,
              [{0: rows, 2: source}] * layers, [{0: rows, 2: source}] * layers, {0: rows, 3: source})
    os.makedirs(folder, exist_ok=True)
    started = time.perf_counter()
    with torch.no_grad():
        program = torch.export.export(Step(), example, dynamic_shapes=shapes)
        path = torch._inductor.aoti_compile_and_package(program, package_path=os.path.join(folder, "step.pt2"))
    built = time.perf_counter() - started
    started = time.perf_counter()
    loaded = torch._inductor.aoti_load_package(path)
    return loaded, built, time.perf_counter() - started


def heads_of_memory(t, heads):
    """(R, S, D) -> (R, H, S, Dh) float32, contiguous (as the engine's cross-attention cache)."""
    rows, length, d = t.shape
    return t.view(rows, length, heads, d // heads).transpose(1, 2).float().contiguous()


if __name__ == "__main__":
    main()
