#!/usr/bin/env python
"""LiRA against the loss attack on the micro model, with up to 16 shadows ([MX] App. F.2 uses 16
per example; Carlini et al. 2022 Fig. 9 for the dependence on the number of shadows).

The micro set-up of :func:`memclaim.audits.micro_lira.build_micro_lira`: 400 twelve-word records of
varied difficulty, half planted once each in a 1-layer GPT-2 (n_embd 32), the other half held
out. Shadows come in complementary pairs, so the 4- and 8-shadow results use the first shadows
of the 16 (one training run). For each count: AUC with DeLong interval, TPR at the certified
FPR 4/201 with Clopper-Pearson interval, and the paired comparison of online LiRA with the loss
attack (exact McNemar at the thresholds; paired bootstrap with re-drawn thresholds).

    python benchmarks/bench_lira.py                    # 16 shadows, results in /tmp/memclaim-bench-lira
    python benchmarks/bench_lira.py --shadows 8 --out runs/lira --json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="/tmp/memclaim-bench-lira")
    ap.add_argument("--shadows", type=int, default=16)
    ap.add_argument("--fpr", default="0.02")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    import torch

    from memclaim.audits.metrics import compare_tprs
    from memclaim.audits.micro_lira import build_micro_lira
    from memclaim.audits.run import run_audit
    from memclaim.audits.settings import AuditSettings

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    t0 = time.perf_counter()
    ms = build_micro_lira(out / "setup")
    t_build = time.perf_counter() - t0
    settings = AuditSettings(
        prefix_tokens=1,
        suffix_tokens=12,
        fpr=args.fpr,
        extraction_policy=None,
        attacks=("loss", "zlib", "min-k", "min-k++", "lira-online", "lira-offline"),
    )
    t1 = time.perf_counter()
    full = run_audit(
        ms.target,
        ms.members,
        ms.nonmembers,
        out_dir=out / "audit",
        sot="bos",
        shadows=args.shadows,
        shadow_recipe=ms.recipe,
        settings=settings,
    )
    t_full = time.perf_counter() - t1
    counts = [c for c in (4, 8, 16, 32, 64) if c < args.shadows] + [args.shadows]
    rows = []
    for n in counts:
        res = (
            full
            if n == args.shadows
            else run_audit(
                ms.target,
                ms.members,
                ms.nonmembers,
                out_dir=out / "audit",
                sot="bos",
                shadows=n,
                shadow_recipe=ms.recipe,
                settings=settings,
            )
        )
        on, loss = res.attack("lira-online"), res.attack("loss")
        c = compare_tprs(
            on.member_scores,
            on.nonmember_scores,
            loss.member_scores,
            loss.nonmember_scores,
            fpr=args.fpr,
            alternative="greater",
            n_bootstrap=5000,
            seed=0,
        )
        row = {"shadows": n, "attacks": {}}
        for e in res.attacks:
            row["attacks"][e.attack] = {
                "auc": e.auc.auc,
                "auc_low": e.auc.low,
                "auc_high": e.auc.high,
                "tpr": e.tpr.tpr,
                "tpr_low": e.tpr.low,
                "tpr_high": e.tpr.high,
                "certified_fpr": e.tpr.certified_fpr,
            }
        row["lira_vs_loss"] = {
            "tpr_lira": c.tpr_a.tpr,
            "tpr_loss": c.tpr_b.tpr,
            "mcnemar_p": c.p_value,
            "bootstrap_p": c.bootstrap_p,
            "diff": c.difference,
            "diff_low": c.diff_low,
            "diff_high": c.diff_high,
        }
        ll = next(cf for cf in res.counterfactual if "log-loss" in cf.score)
        row["mem_logloss_cond"] = {
            "mean": ll.estimate.mean_mem,
            "low": ll.estimate.low,
            "high": ll.estimate.high,
        }
        rows.append(row)
    summary = {
        "setup": {
            "records": ms.n_members + ms.n_nonmembers,
            "members": ms.n_members,
            "recipe": ms.recipe.identity(),
            "threads": args.threads,
        },
        "seconds": {
            "build_target": t_build,
            "audit_with_all_shadows": t_full,
            "shadows_trained_now": len(full.shadows.trained),
        },
        "results": rows,
    }
    if args.json:
        print(json.dumps(summary, indent=1))
        return 0
    print(
        f"micro LiRA benchmark: {ms.n_members} members vs {ms.n_nonmembers} non-members, "
        f"FPR {args.fpr} (certified {rows[-1]['attacks']['loss']['certified_fpr']:.4f}); "
        f"build {t_build:.0f}s, audit with {args.shadows} shadows {t_full:.0f}s "
        f"({len(full.shadows.trained)} trained now)"
    )
    for row in rows:
        print(f"\n{row['shadows']} shadows")
        for name, a in row["attacks"].items():
            print(
                f"  {name:<13} AUC {a['auc']:.3f} [{a['auc_low']:.3f}, {a['auc_high']:.3f}]  "
                f"TPR {a['tpr']:.3f} [{a['tpr_low']:.3f}, {a['tpr_high']:.3f}]"
            )
        v = row["lira_vs_loss"]
        print(
            f"  online LiRA - loss: {v['diff']:+.3f} [{v['diff_low']:+.3f}, {v['diff_high']:+.3f}] "
            f"bootstrap p {v['bootstrap_p']:.4f}, McNemar p {v['mcnemar_p']:.2e}"
        )
        m = row["mem_logloss_cond"]
        print(f"  mem_COND (log-loss / 10): {m['mean']:.4f} [{m['low']:.4f}, {m['high']:.4f}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
