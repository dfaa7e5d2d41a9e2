"""The decoder block of decoder_block.kiln outside kiln: in NumPy (float64, the reference the tests
check kiln against) and in PyTorch (eager, the peer run_decoder.py and `make bench-peers` time),
both from one dict of parameters named and shaped as the program's `param`s.

NumPy only at import time: PyTorch is passed in by the caller that has it (the build's virtual
environment has none; Debian's /usr/bin/python3 has python3-torch).
"""

import math
from pathlib import Path

import numpy as np

PROGRAM = Path(__file__).resolve().parent / "decoder_block.kiln"
WIDTH, HEADS, HEAD_WIDTH, MLP_WIDTH = 64, 4, 16, 256
EPS = 1e-5

# The program's parameters and their shapes (what `Program.tensors` lists with the role "param").
PARAMETERS = {
    "ln1_g": (WIDTH,), "ln1_b": (WIDTH,),
    "wq": (WIDTH, HEADS, HEAD_WIDTH), "bq": (HEADS, HEAD_WIDTH),
    "wk": (WIDTH, HEADS, HEAD_WIDTH), "bk": (HEADS, HEAD_WIDTH),
    "wv": (WIDTH, HEADS, HEAD_WIDTH), "bv": (HEADS, HEAD_WIDTH),
    "wo": (HEADS, HEAD_WIDTH, WIDTH), "bo": (WIDTH,),
    "ln2_g": (WIDTH,), "ln2_b": (WIDTH,),
    "w1": (WIDTH, MLP_WIDTH), "b1": (MLP_WIDTH,),
    "w2": (MLP_WIDTH, WIDTH), "b2": (WIDTH,),
}


def random_parameters(seed=0, scale=0.3):
    """Parameters of the program's shapes, float32, normal with std `scale` (the LayerNorms' scales
    around 1), for the peers that do not read kiln's own initial values and for the tests, where
    the LayerNorms' shifts and scales must not be the 0 and 1 that would hide a mistake in them."""
    rng = np.random.default_rng(seed)
    p = {name: (rng.standard_normal(shape) * scale).astype(np.float32) for name, shape in PARAMETERS.items()}
    p["ln1_g"] += 1
    p["ln2_g"] += 1
    return p


def _layer_norm(x, g, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)  # biased, as PyTorch's LayerNorm
    return (x - mu) / np.sqrt(var + EPS) * g + b


_erf = np.vectorize(math.erf, otypes=[np.float64])  # NumPy has no erf of its own


def numpy_forward(p, x):
    """y of the block for x [B, T, 64], computed in float64."""
    p = {k: np.asarray(v, np.float64) for k, v in p.items()}
    x = np.asarray(x, np.float64)
    batch, length, _ = x.shape
    h1 = _layer_norm(x, p["ln1_g"], p["ln1_b"])
    q, k, v = (np.einsum("btd,dhe->bthe", h1, p["w" + n]) + p["b" + n] for n in "qkv")
    s = np.einsum("bthe,buhe->bhtu", q, k) / math.sqrt(HEAD_WIDTH)
    s = np.where(np.tril(np.ones((length, length), bool)), s, -np.inf)  # query t sees keys u <= t
    e = np.exp(s - s.max(-1, keepdims=True))
    a = np.einsum("bhtu,buhe->bthe", e / e.sum(-1, keepdims=True), v)
    r = x + np.einsum("bthe,hec->btc", a, p["wo"]) + p["bo"]
    f = _layer_norm(r, p["ln2_g"], p["ln2_b"]) @ p["w1"] + p["b1"]
    g = 0.5 * f * (1 + _erf(f / math.sqrt(2)))
    return r + g @ p["w2"] + p["b2"]


def torch_block(torch, p):
    """The block as a PyTorch user writes it (nanoGPT's Block: one Linear for q, k and v, a
    masked_fill with -inf, softmax, nn.GELU), holding the parameters `p`. Returns a function of an
    x tensor [B, T, 64] that runs the block under inference_mode."""
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(WIDTH, eps=EPS)
            self.c_attn = nn.Linear(WIDTH, 3 * WIDTH)
            self.c_proj = nn.Linear(WIDTH, WIDTH)
            self.ln_2 = nn.LayerNorm(WIDTH, eps=EPS)
            self.fc = nn.Linear(WIDTH, MLP_WIDTH)
            self.gelu = nn.GELU()
            self.fc_proj = nn.Linear(MLP_WIDTH, WIDTH)
            self.register_buffer("causal", torch.ones(1024, 1024).tril().bool())

        def attention(self, h):
            batch, length, _ = h.shape
            q, k, v = (t.view(batch, length, HEADS, HEAD_WIDTH).transpose(1, 2)
                       for t in self.c_attn(h).split(WIDTH, dim=2))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HEAD_WIDTH))
            att = att.masked_fill(~self.causal[:length, :length], float("-inf")).softmax(-1)
            return self.c_proj((att @ v).transpose(1, 2).contiguous().view(batch, length, WIDTH))

        def forward(self, x):
            x = x + self.attention(self.ln_1(x))
            return x + self.fc_proj(self.gelu(self.fc(self.ln_2(x))))

    block = Block().eval()
    t = {k: torch.from_numpy(np.ascontiguousarray(v, np.float32)) for k, v in p.items()}
    with torch.no_grad():
        # kiln's weights are [in, ..., out]; a Linear's weight is [out, in].
        block.ln_1.weight.copy_(t["ln1_g"])
        block.ln_1.bias.copy_(t["ln1_b"])
        block.c_attn.weight.copy_(torch.cat([t["w" + n].reshape(WIDTH, WIDTH).T for n in "qkv"]))
        block.c_attn.bias.copy_(torch.cat([t["b" + n].reshape(WIDTH) for n in "qkv"]))
        block.c_proj.weight.copy_(t["wo"].reshape(WIDTH, WIDTH).T)
        block.c_proj.bias.copy_(t["bo"])
        block.ln_2.weight.copy_(t["ln2_g"])
        block.ln_2.bias.copy_(t["ln2_b"])
        block.fc.weight.copy_(t["w1"].T)
        block.fc.bias.copy_(t["b1"])
        block.fc_proj.weight.copy_(t["w2"].T)
        block.fc_proj.bias.copy_(t["b2"])

    def forward(x):
        with torch.inference_mode():
            return block(x)

    return forward
