/* noring ERRNO CMD ARGS...: runs CMD with io_uring_setup(2) failing with
 * ERRNO (EPERM or ENOSYS), as Docker's default seccomp profile and hardened
 * kernels (io_uring_disabled=2) do. Installs a seccomp filter, then execs. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: noring EPERM|ENOSYS CMD ARGS...\n");
        return 2;
    }
#if !defined(__x86_64__)
    fprintf(stderr, "noring: the filter is written for x86_64 only\n");
    return 77;
#else
    unsigned err = strcmp(argv[1], "ENOSYS") == 0 ? ENOSYS : EPERM;
    struct sock_filter prog[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | err),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog fp = { .len = sizeof prog / sizeof prog[0], .filter = prog };
    /* NO_NEW_PRIVS: lets an unprivileged process install the filter. */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp)) {
        perror("noring: seccomp");
        return 77;
    }
    execvp(argv[2], argv + 2);
    perror("noring: exec");
    return 127;
#endif
}
