#include <windows.h>
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG len);
BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG chunk = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (!SystemFunction036(data, chunk)) return FALSE;
        data += chunk; len -= chunk;
    }
    return TRUE;
}
