// -- frames, the rendered part: the numbers runtime/cpu/frames.py and
// runtime/algebra/frame_taps.py name (the taps array's words, the spec's), as #defines;
// templates/cpu_frame.c, plain C, follows them (runtime/cpu/native.py ``render``).
#if defined(__F16C__) || defined(__AVX__)
#include <immintrin.h>
#endif

% for name, word in words.items():
#define CLAYOUT_TAP_${name.upper()} ${word}
% endfor

// spec: int64 words, from runtime/cpu/frames.py (SPEC there names them)
% for name, word in spec.items():
#define CLAYOUT_SPEC_${name.upper()} ${word}
% endfor
