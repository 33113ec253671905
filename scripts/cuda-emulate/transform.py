# Rewrites a .cu file of src/ops/cuda into C++ for the CPU emulator
# (emu.h): extern shared arrays point at the block's dynamic shared memory,
# static shared arrays become function statics (blocks run one at a time),
# kernel<<<grid, block, smem, stream>>>(args) becomes emu::launch(...).
# Usage: transform.py IN.cu OUT.cpp
import re, sys
src = open(sys.argv[1]).read()
src = re.sub(r'#include "ops/cuda/', '#include "ops/cuda/', src)
# The tensor-core and async-copy primitives: the emulator's own.
src = src.replace('#include "ops/cuda/tf32_mma.h"', '#include "emu_tf32_mma.h"')
src = src.replace('#include "ops/cuda/f16_mma.h"', '#include "emu_f16_mma.h"')
# CUDA's own headers (cuda_bf16.h, ...) come before emu.h redefines __device__.
cuda_headers = re.findall(r'^#include <cuda_\w+\.h>\n', src, flags=re.M)
src = re.sub(r'^#include <cuda_\w+\.h>\n', '', src, flags=re.M)
src = ''.join(cuda_headers) + '#include "emu.h"\n' + src
src = re.sub(r'extern __shared__ (\w+) (\w+)\[\];', r'\1* \2 = reinterpret_cast<\1*>(emu::dyn_smem());', src)
src = src.replace('__shared__', 'static')
def repl(m):
    return 'emu::launch([&] { %s(%s); }, %s);' % (m.group(1), m.group(3), m.group(2))
src = re.sub(r'(\w+(?:<[\w, :]+>)?)<<<(.*?)>>>\((.*?)\);', repl, src, flags=re.S)
open(sys.argv[2], 'w').write(src)
