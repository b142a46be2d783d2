#include "pinio/common.h"

#define PINIO_STR2_(x) #x
#define PINIO_STR_(x) PINIO_STR2_(x)

const char *pinio_version(void)
{
    return PINIO_STR_(PINIO_VERSION_MAJOR) "." PINIO_STR_(PINIO_VERSION_MINOR) "." PINIO_STR_(
        PINIO_VERSION_PATCH);
}

unsigned pinio_version_number(void)
{
    return PINIO_VERSION_NUMBER;
}
