#include "pinio/common.h"

const char *pinio_version(void)
{
    return PINIO_VERSION_STRING;
}

unsigned pinio_version_number(void)
{
    return PINIO_VERSION_NUMBER;
}
