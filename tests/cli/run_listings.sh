#!/bin/sh
# run_listings.sh MEGAPLAN — `megaplan models` and `megaplan hw`: listings,
# one entry in full, and what they print reads back as the same thing.
set -u
. "$(dirname "$0")/../lib.sh"
bin=$(abs_path "$1")
cd "$T" || exit 1

"$bin" models >models.txt 2>err.txt && [ ! -s err.txt ] || bad "models exits non-zero"
[ "$(wc -l <models.txt)" -eq 41 ] && ok || bad "models: $(wc -l <models.txt) lines, expected 40 presets + header"
for name in gpt3-125m gpt3-175b megatron-1t megatron-22b megatron-530b llama2-70b llama3-405b bert-large megatron-bert-3.9b t5-11b; do
    grep -q "^$name " models.txt && ok || bad "models lacks $name"
done
grep -Eq '^gpt3-175b .* 17[45]\.[0-9]B +175B$' models.txt && ok || bad "gpt3-175b row: $(grep '^gpt3-175b' models.txt)"
"$bin" models --format json >models.json && ok || bad "models --format json"
[ "$(grep -c '"published_params"' models.json)" -eq 40 ] && ok || bad "models json entries"
"$bin" models --format yaml >models.yaml && ok || bad "models --format yaml"

# one model in full: the YAML reads back as the same model
"$bin" models 175B >m.yaml && ok || bad "models 175B"
"$bin" models m.yaml >m2.yaml && ok || bad "models m.yaml"
# (the first line is a comment: published counts only for presets)
tail -n +2 m.yaml >m.body && tail -n +2 m2.yaml >m2.body
cmp -s m.body m2.body && ok || bad "model YAML does not read back the same"
grep -q '^hidden: 12288$' m.yaml && ok || bad "model YAML lacks hidden"
"$bin" models --format json llama3-70b | grep -q '"kv_heads":	8' && ok || bad "models json llama3-70b"

"$bin" hw >hw.txt 2>err.txt && [ ! -s err.txt ] || bad "hw exits non-zero"
[ "$(wc -l <hw.txt)" -eq 8 ] && ok || bad "hw: $(wc -l <hw.txt) lines, expected 7 profiles + header"
for name in dgx-a100 a100-4xhdr dgx-h100 h200 h800 b200 gb200-nvl72; do
    grep -q "^$name " hw.txt && ok || bad "hw lacks $name"
    "$bin" hw "$name" >"$name.yaml" && ok || bad "hw $name"
    "$bin" hw "$name.yaml" >"$name.2.yaml" && ok || bad "hw $name.yaml"
    cmp -s "$name.yaml" "$name.2.yaml" && ok || bad "profile $name does not read back the same"
    "$bin" hw --format json "$name" | grep -q "\"name\":	\"$name\"" && ok || bad "hw json $name"
done
grep -q '^memory: 80 GiB$' dgx-a100.yaml && ok || bad "dgx-a100 memory not 80 GiB"
"$bin" hw --format table dgx-a100 | grep -Eq '^scale_out\.bw_per_gpu +25 GB/s$' && ok || bad "hw --format table dgx-a100"
grep -q '^  bw_per_gpu: 450 GB/s$' dgx-h100.yaml && ok || bad "dgx-h100 NVLink not 450 GB/s per direction"
grep -q '^  bw_per_gpu: 200 GB/s$' h800.yaml && ok || bad "h800 NVLink not 200 GB/s per direction"
# the embedded profiles work from any folder
(cd / && "$bin" hw dgx-a100 >/dev/null) && ok || bad "hw dgx-a100 from /"
"$bin" models --help | grep -q usage && ok || bad "models --help"
"$bin" hw --help | grep -q usage && ok || bad "hw --help"
finish
