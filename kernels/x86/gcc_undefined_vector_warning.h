// Silences a GCC 12 false positive in the AVX-512 sources (include it before their own vector headers):
// _mm512_undefined_* self-initialise and trip -W(maybe-)uninitialized once inlined. Clang lacks the first flag.
#pragma once
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
