"""The model families, built from :mod:`attnlab.core` on the data of :mod:`attnlab.data`: RNN
encoder-decoders with their attention variants, the Transformer, decoding (greedy, beam, batched
translation), the shared losses, and the later lessons' models (agreement pairs, multi-source, image
captioning and the ViT, the speech toy, hierarchical attention over documents).
"""
