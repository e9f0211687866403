"""`camouflage`: [MX] Fig. 9, §8.1 "Camouflage representability (Remark 6.5)": a two-layer
transformer trained by SGD on data drawn from a planted camouflage tree at (v, k, L) = (16, 4, 4).

Pipeline. For each tree: draw the secret z ~ Unif(V^L) and a tree theta ~ P_z
(:class:`memclaim.mechanisms.camouflage.CamouflageTree`, [MX] App. D.1); the training data are
``docs_per_tree`` documents  c || w  with w drawn from the tree's own conditionals (uniform on
each node's k-set), so every one of the k^L = 256 surviving paths is equally likely and nothing
in the data singles out z. The public prefix c is one reserved token; every document is one
training block [SOT, c, w_1..w_L] (``seq_len`` = L + 2), so no block straddles two documents.

Read-outs, each against the construction's exact value:

- learned on-path conditionals p(. | c z_{<t}) at each depth, sorted within the planted k-set,
  and their mass on the k-set (paper: >= 0.98, near 1/k each; Fig. 9 left);
- exact enumeration of all v^L = 65,536 completions under the network
  (:func:`memclaim.mechanisms.camouflage.enumerate_completion_logprobs`) and the posterior over
  the 256 survivors it implies (:func:`memclaim.mechanisms.camouflage.survivor_posterior`):
  normalized entropy (paper 0.984), rank of the true path (paper 26/256), ratio to uniform
  (paper 1.5x; Fig. 9 right);
- teacher-forcing memorization mem_h = E_{P_z} h - E_Q h of the average teacher-forcing score
  h(theta, x*) = (1/L) sum_t p_theta(z_t | c z_{<t}) ([MX] App. D.1, proof of Thm. 6.1(i)) against
  1/k - 1/v = 0.1875 (paper 0.187). E_{P_z} h is measured on the trained network. E_Q h = 1/v
  exactly and needs no second network: under Q the training data do not depend on z, so z is
  uniform and independent of the trained network, and E_z p(z_t | c z_{<t}) = (1/v) sum_u
  p(u | c z_{<t}) = 1/v at every depth, whatever the network (the Q-branch expectation of App.
  D.1 holds for any release that is independent of z, not only for the ideal tree);
- extraction: greedy decoding from c, and the list of the 16 most probable completions (the
  best list-of-16 protocol against this network, by exact enumeration), against the white-box
  cap m k^-L = 0.0625 of Thm. 6.1(i); the informed adversary's top-16 posterior mass beside it.

One tree in ``--quick``; the full run trains several independent trees and reports each, plus
extraction counts over trees with Clopper-Pearson intervals. The paper reports a single tree.
"""

from __future__ import annotations

import math
import os

import numpy as np

from ..audits.metrics import clopper_pearson
from ..mechanisms.camouflage import (
    CamouflageTree,
    enumerate_completion_logprobs,
    paths_to_index,
    survivor_posterior,
)
from ..report.style import legend as style_legend
from ..train.trainer import TrainConfig
from .common import Check, check, compare, new_figure
from .models import (
    THREADS,
    TinyGPTSpec,
    TokenLayout,
    greedy_decode,
    next_token_logprobs,
    tiny_gpt2,
    train_tiny,
)
from .skeleton import Reproduction

NAME = "camouflage"
TITLE = "SGD on camouflage-tree data, (v, k, L) = (16, 4, 4) ([MX] Fig. 9)"
STREAMS = ("trees", "data", "training")


def _settings(quick: bool) -> dict:
    return {
        "v": 16,
        "k": 4,
        "L": 4,
        "trees": 1 if quick else 6,
        "docs_per_tree": 6_000 if quick else 20_000,
        "epochs": 8,
        "batch_size": 64,
        "lr": 1e-2,
        "warmup_steps": 10,
        "n_embd": 32 if quick else 64,
        "n_layer": 2,
        "n_head": 4,
        "list_size": 16,
        "threads": THREADS,
    }


def _next_tree_logprobs(model, prefix: list[int], v: int):
    """next_logprobs(prefixes (n, t)) -> (n, v): the network's log p(u | SOT c w_{<t}) for the tree
    tokens u = 0..v-1 (not renormalized: mass on other tokens stays outside every completion)."""

    def f(prefixes: np.ndarray) -> np.ndarray:
        n = prefixes.shape[0]
        ctx = np.concatenate(
            [np.tile(np.asarray(prefix, dtype=np.int64), (n, 1)), prefixes], axis=1
        )
        return next_token_logprobs(model, ctx)[:, :v]

    return f


def _one_tree(
    tree: CamouflageTree,
    *,
    s: dict,
    layout: TokenLayout,
    data_rng: np.random.Generator,
    train_seed: int,
) -> dict:
    v, k, L = tree.v, tree.k, tree.L
    c = layout.reserved(0)
    sot = layout.sot
    prefix = [sot, c]
    # training documents: paths drawn from the tree's own conditionals = uniform over survivors
    paths = tree.sample_surviving_paths(s["docs_per_tree"], rng=data_rng)  # (n, L)
    docs = [np.concatenate([[c], p]) for p in paths]
    seq_len = L + 2  # [SOT, c, w_1..w_L]: one document per block
    n_blocks = len(docs)
    steps = int(math.ceil(s["epochs"] * n_blocks / s["batch_size"]))
    spec = TinyGPTSpec(
        vocab_size=layout.size,
        n_positions=seq_len,
        n_layer=s["n_layer"],
        n_embd=s["n_embd"],
        n_head=s["n_head"],
    )
    model = tiny_gpt2(spec, seed=train_seed, sot=sot)
    cfg = TrainConfig(
        steps=steps,
        batch_size=s["batch_size"],
        seq_len=seq_len,
        lr=s["lr"],
        warmup_steps=s["warmup_steps"],
        seed=train_seed,
    )
    tr = train_tiny(model, docs, cfg, sot=sot, threads=s["threads"])

    z = np.asarray(tree.secret, dtype=np.int64)
    nxt = _next_tree_logprobs(model, prefix, v)
    # on-path conditionals p(. | c z_<t), t = 1..L  (Fig. 9 left)
    on_path = []
    for t in range(L):
        lp = nxt(z[None, :t])[0]  # (v,)
        sup = np.asarray(tree.support(tuple(int(x) for x in z[:t])))
        p = np.exp(lp)
        order = np.argsort(-p[sup], kind="stable")
        on_path.append(
            {
                "depth": t + 1,
                "support": sup.tolist(),
                "true_token": int(z[t]),
                "probs_in_support_sorted": p[sup][order].tolist(),
                "true_token_prob": float(p[z[t]]),
                "true_token_rank_in_support": int(1 + np.sum(p[sup] > p[z[t]])),
                "mass_on_support": float(p[sup].sum()),
                "max_over_min_in_support": float(p[sup].max() / p[sup].min()),
                "true_over_mean_decoy": float(p[z[t]] / np.mean([p[u] for u in sup if u != z[t]])),
            }
        )
    # exact enumeration of all v^L completions (Fig. 9 right)
    lp_all = enumerate_completion_logprobs(nxt, v=v, L=L)  # (v^L,)
    post = survivor_posterior(tree, lp_all)
    zi = int(paths_to_index(z[None, :], v=v)[0])
    rank_all = int(1 + np.sum(lp_all > lp_all[zi]))
    m = s["list_size"]
    top_m = np.argsort(-lp_all, kind="stable")[:m]
    greedy = greedy_decode(model, [prefix], n_tokens=L)[0]
    greedy_on_tree = bool(np.all(greedy < v))
    h = float(np.mean([r["true_token_prob"] for r in on_path]))  # TF score of x* under the network
    post_sorted = np.sort(post.posterior)[::-1]
    return {
        "secret": z.tolist(),
        "tree_seed": tree.seed,
        "train": {
            "steps": tr.steps,
            "tokens": tr.tokens,
            "first_loss": tr.first_loss,
            "final_loss": tr.final_loss,
            # entropy of the data per block: L log k nats over L + 1 predicted tokens after SOT
            "data_entropy_per_token": L * math.log(k) / (L + 1),
        },
        "on_path": on_path,
        "min_mass_on_support": min(r["mass_on_support"] for r in on_path),
        "teacher_forcing_score": h,
        "ideal_teacher_forcing_score": float(tree.teacher_forcing_score(z[None, :])[0]),
        "tf_memorization": h - 1.0 / v,
        "posterior": {
            "n_survivors": post.n_survivors,
            "survivor_mass": post.survivor_mass,
            "entropy_bits": post.entropy_bits,
            "normalized_entropy": post.normalized_entropy,
            "max_ratio_to_uniform": post.max_ratio_to_uniform,
            "true_rank": post.true_rank,
            "true_ties": post.true_ties,
            "true_ratio_to_uniform": post.true_ratio_to_uniform,
            "top_m_mass": float(post_sorted[:m].sum()),
            "sorted_ratio_to_uniform": (post_sorted * post.n_survivors).tolist(),
        },
        "true_rank_among_all_completions": rank_all,
        "mass_on_tree_tokens": float(np.exp(np.logaddexp.reduce(lp_all))),
        "greedy": greedy.tolist(),
        "greedy_is_survivor": bool(greedy_on_tree and tree.is_surviving(greedy[None, :])[0]),
        "greedy_success": bool(np.array_equal(greedy, z)),
        "list_success": bool(zi in set(top_m.tolist())),
    }


# ---- the check: [MX] §8.2's sentence on the camouflage tree at scale, tested as stated
QUOTE_CAPPED = (
    "greedy decoding fails, a list of sixteen candidates recovers it in 1 of 16 trees, consistent with the "
    "bound mk−L = 0.0625"
)


def checks_for(summary: dict, settings: dict) -> list[Check]:
    """The check of [MX] §8.2 (Theorem 6.1(i)) from the run's summary (``greedy_successes``,
    ``greedy_interval``, ``list_successes``, ``list_interval``, ``trees``, ``list_cap``) and settings (``k``,
    ``L``), the sentence as stated: "greedy decoding fails" (no tree's greedy output is the secret; the
    cap k^-L = 1/256 per tree makes a success on any of T trees a false alarm of at most T k^-L), and the
    list of m candidates is "consistent with the bound m k^-L" (its 95% Clopper-Pearson interval's lower
    end is at most the cap). The paper's "1 of 16 trees" is its count, not a rule.

    >>> from memclaim.experiments.camouflage import checks_for
    >>> summ = {"trees": 1, "greedy_successes": 0, "greedy_interval": [0.0, 0.975], "list_successes": 0,
    ...         "list_interval": [0.0, 0.975], "list_cap": 0.0625}
    >>> [c.passed for c in checks_for(summ, {"k": 4, "L": 4})]
    [True]
    >>> [c.passed for c in checks_for({**summ, "trees": 16, "list_successes": 9, "list_interval": [0.30, 0.80]},
    ...                               {"k": 4, "L": 4})]
    [False]
    >>> # greedy recovers 1 of 16 trees: consistent with k^-L (lower end 0.0016), but greedy did not fail
    >>> [c.passed for c in checks_for({**summ, "trees": 16, "greedy_successes": 1, "greedy_interval": [0.0016, 0.30],
    ...                                "list_successes": 1, "list_interval": [0.0016, 0.30]}, {"k": 4, "L": 4})]
    [False]
    """
    k, L = settings["k"], settings["L"]
    n, cap = summary["trees"], summary["list_cap"]
    l_lo = summary["list_interval"][0]
    return [
        check(
            "extraction is capped: greedy decoding fails on every tree, and list-of-16 successes are consistent "
            "with m k^-L (Clopper-Pearson 95% lower end <= cap)",
            summary["greedy_successes"] == 0 and l_lo <= cap,
            f"greedy {summary['greedy_successes']}/{n}, list-of-16 {summary['list_successes']}/{n}; caps k^-L = "
            f"{k**-L:.5f}, m k^-L = {cap:.4f}",
            false_alarm=f"greedy: <= {n} x k^-L = {n * k**-L:.2%} if its rate is at the cap (union bound over "
            f"the {n} trees); list: <= 2.5% if its rate is at the cap",
            quote=QUOTE_CAPPED,
            where="[MX] §8.2 'Direction (i) at scale', Theorem 6.1(i)",
        ),
    ]


class Camouflage(Reproduction):
    """[MX] Fig. 9 on the skeleton (:mod:`.skeleton`): one tiny GPT per camouflage tree."""

    name, title, streams = NAME, TITLE, STREAMS
    reproduces = (
        "[MX] Fig. 9",
        "[MX] §8.1 camouflage representability",
        "[MX] Thm. 6.1(i) teacher-forcing memorization 1/k - 1/v",
    )

    def settings(self) -> dict:
        return _settings(self.quick)

    def data(self) -> list[tuple[CamouflageTree, int]]:
        """The trees (v, k, L), each with the seed of its model's training."""
        s, rngs = self.s, self.rngs
        out = []
        for _ in range(s["trees"]):
            tree = CamouflageTree.draw(v=s["v"], k=s["k"], L=s["L"], rng=rngs["trees"])
            out.append((tree, int(rngs["training"].integers(0, 2**31 - 1))))
        return out

    def runs(self, data: list[tuple[CamouflageTree, int]]) -> dict:
        """A model trained on each tree's documents, read out (:func:`_one_tree`), and the summary over trees."""
        s = self.s
        v, k, L = s["v"], s["k"], s["L"]
        layout = TokenLayout(n_natural=v, n_reserved=1)
        trees = [
            _one_tree(tree, s=s, layout=layout, data_rng=self.rngs["data"], train_seed=train_seed)
            for tree, train_seed in data
        ]
        target_mem = 1.0 / k - 1.0 / v
        cap = s["list_size"] * k ** (-L)
        n = len(trees)
        mem = np.array([t["tf_memorization"] for t in trees])
        norm_ent = np.array([t["posterior"]["normalized_entropy"] for t in trees])
        greedy_hits = sum(t["greedy_success"] for t in trees)
        list_hits = sum(t["list_success"] for t in trees)
        g_lo, g_hi = clopper_pearson(greedy_hits, n)
        l_lo, l_hi = clopper_pearson(list_hits, n)
        summary = {
            "trees": n,
            "tf_memorization_mean": float(mem.mean()),
            "tf_memorization_se": float(mem.std(ddof=1) / math.sqrt(n)) if n > 1 else None,
            "target_tf_memorization": target_mem,
            "normalized_entropy_mean": float(norm_ent.mean()),
            "min_mass_on_support": min(t["min_mass_on_support"] for t in trees),
            "true_ranks": [t["posterior"]["true_rank"] for t in trees],
            "true_ratio_to_uniform": [t["posterior"]["true_ratio_to_uniform"] for t in trees],
            "greedy_successes": greedy_hits,
            "greedy_interval": [g_lo, g_hi],
            "list_successes": list_hits,
            "list_interval": [l_lo, l_hi],
            "list_cap": cap,
            "informed_top_m_mass_mean": float(
                np.mean([t["posterior"]["top_m_mass"] for t in trees])
            ),
            "mass_on_tree_tokens_min": min(t["mass_on_tree_tokens"] for t in trees),
        }
        # The Monte-Carlo noise of mem: the noise of one tree's learned conditionals. With N documents a
        # depth-t on-path node is visited about N k^-t times and each child's empirical frequency has
        # sd sqrt((1/k)(1 - 1/k) k^t / N); the average over the L depths then has sd
        # sqrt(sum_t (1/k)(1-1/k) k^t / N) / L (if the learned conditionals track the empirical
        # frequencies); for the mean over n trees it shrinks by sqrt(n). Reported, not used for a verdict.
        N = s["docs_per_tree"]
        summary["tf_memorization_noise_sd_per_tree"] = (
            math.sqrt(sum((1 / k) * (1 - 1 / k) * k**t / N for t in range(L))) / L
        )
        return {"summary": summary, "trees": trees}

    def checks(self, results: dict) -> list[Check]:
        return checks_for(results["summary"], self.s)

    def paper_numbers(self, results: dict) -> list:
        summary, first = results["summary"], results["trees"][0]
        mem = np.array([t["tf_memorization"] for t in results["trees"]])
        return [
            compare(
                "tf_memorization",
                "camouflage/tf-memorization",
                first["tf_memorization"],
                ours_se=summary["tf_memorization_noise_sd_per_tree"],
                note=f"tree 1; mean over {summary['trees']} tree(s) {mem.mean():.4f}; ours_se: the empirical "
                f"conditionals' noise along z at {self.s['docs_per_tree']} documents",
            ),
            compare(
                "construction",
                "camouflage/construction",
                summary["target_tf_memorization"],
                note="exact",
            ),
            compare(
                "normalized_entropy",
                "camouflage/normalized-entropy",
                first["posterior"]["normalized_entropy"],
                note="tree 1; the paper's data size and training length are not given",
            ),
            compare(
                "mass_on_support",
                "camouflage/mass-on-support",
                first["min_mass_on_support"],
                note="tree 1, minimum over the depths",
            ),
            compare("list_cap", "camouflage/list-cap", summary["list_cap"], note="exact"),
        ]

    def figure(self, results: dict, *, claims, differences):
        k, L, first = self.s["k"], self.s["L"], results["trees"][0]
        fig, (ax0, ax1) = new_figure(2, width=5.2, height=4.0)
        cols = ["tab:blue", "tab:orange", "tab:green", "tab:purple"]
        xs = np.arange(1, k + 1)
        for r, col in zip(first["on_path"], cols):
            ax0.plot(
                xs, r["probs_in_support_sorted"], "o-", color=col, ms=4, label=f"depth {r['depth']}"
            )
            ax0.plot(
                [r["true_token_rank_in_support"]],
                [r["true_token_prob"]],
                "o",
                mfc="none",
                mec="red",
                ms=10,
                mew=1.5,
            )
        ax0.axhline(1 / k, ls="--", color="k", lw=1, label="1/k")
        ax0.plot([], [], "o", mfc="none", mec="red", label="true token")
        ax0.set_xticks(xs)
        ax0.set_xlabel("surviving k-set, sorted")
        ax0.set_ylabel(r"learned $p_\theta$")
        ax0.set_ylim(
            0, max(0.5, 1.15 * max(max(r["probs_in_support_sorted"]) for r in first["on_path"]))
        )
        ax0.set_title("on-path conditionals")
        style_legend(ax0, below=True)
        ratios = np.array(first["posterior"]["sorted_ratio_to_uniform"])
        ax1.hist(ratios, bins=30, color="tab:gray")
        ax1.axvline(1.0, ls="--", color="k", lw=1, label=r"uniform $k^{-L}$")
        ax1.axvline(
            first["posterior"]["true_ratio_to_uniform"],
            color="red",
            lw=2,
            label=f"true path (rank {first['posterior']['true_rank']}/256)",
        )
        ax1.set_xlabel(f"survivor posterior x {k**L}")
        ax1.set_ylabel("surviving paths")
        ax1.set_title(
            f"posterior over survivors (normalized entropy {first['posterior']['normalized_entropy']:.3f})"
        )
        style_legend(ax1, below=True)
        return fig

    def notes(self, results: dict) -> list[str]:
        return [
            "E_Q h = 1/v exactly (z independent of any Q-branch release), so mem_h = h(theta_Pz, z) - 1/v",
            "completion probabilities are the network's joint log-probabilities of the L tree tokens after [SOT, c] "
            "(no renormalization over the tree tokens; mass_on_tree_tokens reports what is left)",
            "the paper's data size and training schedule for this figure are not reported; ours are in settings",
        ]


def run(
    *, quick: bool = False, seed: int = 0, out_dir: str | os.PathLike = "reproductions"
) -> dict:
    """[MX] Fig. 9: SGD on camouflage-tree data; flat survivor posterior, TF memorization 1/k - 1/v.

    Writes ``camouflage.json``, ``camouflage.png`` and ``camouflage.pdf`` into ``out_dir`` (created) and
    returns the JSON-ready dict (:func:`memclaim.experiments.common.finish`); what ``memclaim reproduce
    camouflage`` runs.

    >>> from memclaim.experiments.camouflage import run
    >>> res = run(quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> res["name"], res["all_checks_passed"]  # doctest: +SKIP
    ('camouflage', True)
    """
    return Camouflage(quick=quick, seed=seed, out_dir=out_dir).reproduce()
