"""Which TF Serving releases can run a SavedModel's ops: TensorFlow core ops, and the tensorflow-text ops each
release links in; ops with Python kernels are refused.

TF Serving links TensorFlow's core ops and a fixed tensorflow-text release: TF Serving 2.19.1 and older embed
tf-text 2.12.1 (tensorflow/serving#4057), 2.20.0 embeds tf-text 2.20.0. `TF_SERVING_RELEASES` gives, for each, that
tf-text release and the ops of the tensorflow-text installed here (2.21.1: 37 ops) that it lacks. It was made by
reading each release's wheel from PyPI (`pip download tensorflow-text==2.12.1 --no-deps`) and looking for every
installed op's registered name in its op libraries (`tensorflow_text/python/ops/*.so`): 34 of the 37 are there in
2.12.1, all 37 in 2.20.0.
"""

import dataclasses

# TF Serving release -> (the tensorflow-text release it embeds, the installed tf-text ops that release lacks).
TF_SERVING_RELEASES = {
    "2.19.1": ("2.12.1", frozenset({"TFText>RoundRobinTrim", "TFText>RoundRobinGenerateMasks", "TFText>Utf8Binarize"})),
    "2.20.0": ("2.20.0", frozenset()),
}
DEFAULT_TF_SERVING = "2.20.0"

# Registered in TensorFlow's op registry, but their kernels call back into Python, which TF Serving does not have.
PYTHON_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})


def _version_key(version):
    return tuple(int(part) for part in version.split("."))


@dataclasses.dataclass
class OpAudit:
    """The outcome of `audit_ops`: `problems` is empty when `tf_serving` can serve the model.

    Example:
    ```python
    from kzoo.serving import audit_ops

    audit = audit_ops({"MatMul": ["graph"]}, core_ops={"MatMul"}, text_ops=set())
    assert audit.ok and audit.minimum_tf_serving == "2.19.1" and audit.text_ops == []
    ```
    """

    tf_serving: str
    minimum_tf_serving: str | None  # the oldest release in TF_SERVING_RELEASES that has every op; None if none has
    text_ops: list
    problems: list

    @property
    def ok(self):
        return not self.problems


def audit_ops(graph_ops, core_ops, text_ops, tf_serving=DEFAULT_TF_SERVING):
    """Check a model's ops against what TF Serving `tf_serving` links in.

    Args:
        graph_ops: {op type: [where used]}, every op of the graph and of every function in its library
            (`kzoo.serving.wire_format.graph_ops`).
        core_ops: the op names TensorFlow registers by itself (a C API process before any library is loaded).
        text_ops: the op names the installed tensorflow-text adds.
        tf_serving: the TF Serving release to check for, a key of `TF_SERVING_RELEASES`.

    Example:
    ```python
    from kzoo.serving import audit_ops

    graph_ops = {"TFText>RoundRobinTrim": ["function serve"], "PyFunc": ["graph"], "MatMul": ["graph"]}
    audit = audit_ops(graph_ops, {"MatMul", "PyFunc"}, {"TFText>RoundRobinTrim"}, tf_serving="2.19.1")
    assert audit.minimum_tf_serving == "2.20.0" and len(audit.problems) == 2
    assert "PyFunc (in graph) runs Python" in audit.problems[0]
    ```
    """
    if tf_serving not in TF_SERVING_RELEASES:
        raise ValueError(f"tf_serving={tf_serving!r} is not a release kzoo knows the ops of; use one of "
                         f"{sorted(TF_SERVING_RELEASES, key=_version_key)}.")
    problems = []
    for op, where in sorted(graph_ops.items()):
        if op in PYTHON_OPS:
            problems.append(f"{op} (in {', '.join(where)}) runs Python, which TF Serving does not have: express it "
                            "with TensorFlow ops (no tf.py_function / tf.numpy_function in exported functions).")
        elif op not in core_ops and op not in text_ops:
            problems.append(f"{op} (in {', '.join(where)}) is neither a TensorFlow core op nor a tensorflow-text op: "
                            "TF Serving cannot run it.")
    used_text_ops = sorted(op for op in graph_ops if op in text_ops)
    servable = [release for release, (_, missing) in TF_SERVING_RELEASES.items() if not missing & set(used_text_ops)]
    minimum = min(servable, key=_version_key) if servable else None
    _, missing = TF_SERVING_RELEASES[tf_serving]
    lacking = sorted(missing & set(used_text_ops))
    if lacking:
        problems.append(f"TF Serving {tf_serving} embeds tensorflow-text {TF_SERVING_RELEASES[tf_serving][0]}, which "
                        f"lacks {lacking}: serve with TF Serving {minimum} or newer.")
    return OpAudit(tf_serving, minimum, used_text_ops, problems)
