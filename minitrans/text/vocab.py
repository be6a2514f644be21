"""The special token ids, fixed for every minitrans model: no SentencePiece, no torch.

SentencePiece ids *are* the vocabulary (:mod:`minitrans.text.tokenizer` trains every model with
these ids), so the model, the batches and the search know the special tokens without loading a
tokenizer.
"""

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
