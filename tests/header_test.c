/* Compiled once per public header, with only that header included first, so
 * that every header stands on its own (dav1d tests/header_test.c). */
#include PINIO_HEADER
#include PINIO_HEADER /* and is idempotent */

int main(void)
{
    return 0;
}
