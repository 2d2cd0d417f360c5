"""``pte-lab replan``: every arena planned again, the program written anew and, with ``--verify``, run both ways."""

from __future__ import annotations

import os

from ..errors import PteLabError
from ..progress import lines
from ..vocabulary import PLANNER_NAMES
from .common import new_file, whole


def register(subparsers) -> None:
    rp = subparsers.add_parser("replan", help="replan every arena, write a new .pte, optionally verify it")
    rp.add_argument("input", help="the program (.pte) to replan")
    rp.add_argument("output", type=new_file, help="the replanned .pte to write (its folder must exist)")
    rp.add_argument("--algorithm", "-a", default="best_fit", choices=sorted(PLANNER_NAMES),
                    help="the planner of every arena (default best_fit): ExecuTorch's greedy, best_fit, first_fit "
                         "(TFLite Micro's), naive (one after another, nothing shared), or optimal (exhaustive: tiny "
                         "arenas only)")
    rp.add_argument("--keep-io", action="store_true",
                    help="keep planned inputs and outputs apart from every other tensor (each holds its bytes over "
                         "the whole method), so that an app executing again without setting an input reads the "
                         "input it set, not an output written over it (costs the bytes they shared)")
    rp.add_argument("--verify", action="store_true",
                    help="run both with ExecuTorch, each method called --runs times in a row with its state "
                         "carried (an LLM: prefill, then decode steps); every output must be bit-identical")
    rp.add_argument("--runs", type=whole(1), default=4, help="calls per method when verifying (default 4)")
    rp.add_argument("--data", help="the .ptd the program takes external data from (for --verify)")
    rp.set_defaults(func=run)


def run(args) -> int:
    from ..planning import replan, verify
    from ..views.text import replan_text

    if os.path.exists(args.output) and os.path.samefile(args.input, args.output):
        raise PteLabError(f"argument output: {args.output!r} is the input file; write the replanned program "
                          f"elsewhere")

    say = lines()
    say(f"planning every arena with {args.algorithm}")
    r = replan(args.input, algorithm=args.algorithm, keep_io=args.keep_io)
    say(f"writing {args.output} with ExecuTorch's serializer (importing it takes a few seconds)")
    r.write(args.output)
    say("written and read back: only offsets and arena sizes changed")
    print(f"replanned with {args.algorithm}: {args.input} -> {args.output}")
    print(replan_text(r))
    if r.original.expects_external_data:
        print(f"its external data is not rewritten: load {args.output} with the same .ptd"
              + (f" ({args.data})" if args.data else ""))
    if args.verify:
        results = verify(args.input, args.output, runs=args.runs, progress=say, data_path=args.data)
        for v in results:
            print(f"verify {v.method}: {'bit-identical' if v.identical else 'DIFFERENT: ' + v.detail} "
                  f"over {v.runs} calls in a row (state carried; dtype, shape and bytes compared)"
                  + (f"; outputs not finite: {v.not_finite}" if v.not_finite else ""))
        if not all(v.identical for v in results):
            return 1
    return 0
