/*
 * A stand-in for bcryptprimitives.dll, for running the Windows test build
 * under Wine 8 (Debian 12), which has no such DLL. Rust's standard library
 * (1.78 and later) imports ProcessPrng from it for HashMap keys and other
 * randomness, so without it no Rust program starts under that Wine.
 *
 * ProcessPrng fills a buffer with random bytes and always succeeds (Microsoft
 * documents it as returning TRUE). Here it asks RtlGenRandom
 * (advapi32!SystemFunction036), which Wine has.
 *
 * Built by .ci/windows.sh with mingw-w64; never shipped with forza-relay.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
