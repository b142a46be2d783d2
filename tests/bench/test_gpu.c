/* pinio bench into GPU memory (pinio_bench_opts::mem) through the CUDA and
 * HIP test drivers (tests/stream/fake_cuda.c, keeping "device" memory in
 * host memory): every block that landed on the device read back and
 * checked against what the file holds, a staging buffer never read into
 * under a pending copy (the driver counts it), the stages' figures
 * consistent by arithmetic (never by how fast anything ran), and the
 * refusals: no driver, no such device, writes. The file is a bench verify
 * file in /dev/shm (buffered: tmpfs has no O_DIRECT). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pinio/bench.h"
#include "tests/common/helpers.h"
#include "tests/stream/fake_cuda.h"

#define BS (64u << 10)
#define SIZE (4u << 20)

static char path[128];

static void setup(void)
{
    char run[17];
    cr_assert_eq(t_run(run, sizeof run), 0);
    snprintf(path, sizeof path, "/dev/shm/pinio-%s-bench-gpu-%d", run, (int)getpid());
    unlink(path);
}

static void teardown(void)
{
    unlink(path);
}

TestSuite(bench_gpu, .init = setup, .fini = teardown);

static void base(pinio_bench_opts *o)
{
    pinio_bench_opts_default(o);
    o->path = path;
    o->direct = false;
    o->bs = BS;
    o->size = SIZE;
    o->seed = 41;
}

/* The file a --verify write leaves: what verify_only checks blocks against. */
static void make_file(void)
{
    pinio_bench_opts o;
    pinio_bench_result r;
    pinio_diag d = {0};
    base(&o);
    o.rw = PINIO_BENCH_WRITE;
    o.verify = true;
    cr_assert_eq(pinio_bench_run(&o, &r, &d), 0, "%s", d.msg);
}

/* One verified read into `mem`, and what the test driver counted. */
static void read_into(const char *env, const char *mem, pinio_bench_rw rw, unsigned qd,
                      unsigned jobs)
{
    void *h;
    fake_stats_fn stats = fake_gpu_load(env, &h);
    cr_assert(stats, "%s does not name the test driver", env);
    make_file();
    pinio_bench_opts o;
    pinio_bench_result r;
    pinio_diag d = {0};
    base(&o);
    o.rw = rw;
    o.qd = qd;
    o.jobs = jobs;
    o.verify_only = true;
    o.mem = mem;
    cr_assert_eq(pinio_bench_run(&o, &r, &d), 0, "%s", d.msg);
    fake_stats st;
    stats(&st);
    cr_expect_str_eq(r.gpu_mem, mem);
    cr_expect(r.gpu_name[0], "the device's name");
    /* bytes per stage equal: every byte read was copied and checked there */
    cr_expect_eq(r.read.bytes, SIZE);
    cr_expect_eq(r.gpu_bytes, r.read.bytes);
    cr_expect_eq(r.gpu_verified_bytes, r.read.bytes, "%llu of %u bytes checked on the device",
                 (unsigned long long)r.gpu_verified_bytes, SIZE);
    cr_expect_eq(r.verified_bytes, r.read.bytes);
    /* what a real driver or GPU would punish */
    cr_expect_eq(st.overwritten, 0, "%lu staging buffers read into under a pending copy",
                 st.overwritten);
    cr_expect_eq(st.unregistered, 0, "copies from unregistered memory");
    cr_expect_eq(st.out_of_bounds, 0, "copies outside a device allocation");
    cr_expect_eq(st.no_context, 0, "calls without a current device");
    cr_expect_eq(st.registered_live, 0, "staging left registered");
    cr_expect_eq(st.allocs_live, 0, "device memory left allocated");
    cr_expect_eq(st.streams_live, 0, "streams left");
    cr_expect_geq(st.copies, SIZE / BS, "%lu copies", st.copies);
    cr_expect_eq(st.d2h_bytes, SIZE, "read back from the device: %lu bytes", st.d2h_bytes);
    /* the stages, by arithmetic */
    cr_expect_gt(r.gpu_copy_alone_bytes_per_s, 0);
    cr_expect_gt(r.gpu_read_s, 0);
    cr_expect_leq(r.gpu_read_s, r.seconds);
    cr_expect_gt(r.gpu_h2d_s, 0);
    cr_expect_leq(r.gpu_h2d_s, r.seconds);
    cr_expect_geq(r.gpu_wait_s, 0);
    cr_expect_leq(r.gpu_wait_s, r.seconds);
    double copy_s = (double)r.gpu_bytes / r.gpu_copy_alone_bytes_per_s;
    double ov = 1 - r.gpu_wait_s / copy_s;
    ov = ov < 0 ? 0 : ov > 1 ? 1 : ov;
    cr_expect_float_eq(r.gpu_overlap, ov, 1e-9, "overlap %f, 1 - %f / %f", r.gpu_overlap,
                       r.gpu_wait_s, copy_s);
    dlclose(h);
}

Test(bench_gpu, cuda_qd1_every_block_verified_on_the_device)
{
    read_into("PINIO_CUDA_LIB", "cuda:0", PINIO_BENCH_READ, 1, 1);
}

Test(bench_gpu, cuda_two_jobs_random_verified_on_the_device)
{
    read_into("PINIO_CUDA_LIB", "cuda:0", PINIO_BENCH_RANDREAD, 8, 2);
}

Test(bench_gpu, hip_every_block_verified_on_the_device)
{
    read_into("PINIO_HIP_LIB", "hip:0", PINIO_BENCH_READ, 4, 1);
}

/* A copy that lands changed: the host check passes, the device check
 * names the block and the byte. */
Test(bench_gpu, a_block_changed_on_the_device_is_named)
{
    make_file();
    setenv("FAKE_CUDA_FAIL", "flip:3", 1); /* the job stream's third copy: block 2 */
    pinio_bench_opts o;
    pinio_bench_result r;
    pinio_diag d = {0};
    base(&o);
    o.qd = 1;
    o.verify_only = true;
    o.mem = "cuda:0";
    cr_assert_eq(pinio_bench_run(&o, &r, &d), -EBADMSG, "%s", d.msg);
    cr_expect(strstr(d.msg, "verify on cuda:0: the block at offset 131072 (65536 bytes) "
                            "differs in device memory at file offset 163840"), "%s", d.msg);
    cr_expect(strstr(d.msg, "matched in host memory"), "%s", d.msg);
    cr_expect(strstr(d.msg, path), "%s", d.msg);
}

Test(bench_gpu, no_driver_names_what_was_tried)
{
    setenv("PINIO_CUDA_LIB", "/nonexistent/pinio-no-driver/libcuda.so.1", 1);
    pinio_bench_opts o;
    pinio_bench_result r;
    pinio_diag d = {0};
    base(&o);
    o.mem = "cuda:0";
    cr_assert_eq(pinio_bench_run(&o, &r, &d), -ENODEV, "%s", d.msg);
    cr_expect(strstr(d.msg, "--mem cuda:0: no CUDA driver: "
                            "/nonexistent/pinio-no-driver/libcuda.so.1"), "%s", d.msg);
    cr_expect(strstr(d.msg, "PINIO_CUDA_LIB"), "%s", d.msg);
    cr_expect_neq(access(path, F_OK), 0, "the target was made before the driver was asked");
}

Test(bench_gpu, no_such_device_names_it)
{
    setenv("FAKE_CUDA_DEVICES", "2", 1);
    pinio_bench_opts o;
    pinio_bench_result r;
    pinio_diag d = {0};
    base(&o);
    o.mem = "cuda:2";
    cr_assert_eq(pinio_bench_run(&o, &r, &d), -ENODEV, "%s", d.msg);
    cr_expect(strstr(d.msg, "--mem cuda:2: no such device: the CUDA driver has 2 devices "
                            "(cuda:0 to cuda:1), no cuda:2"), "%s", d.msg);
    cr_expect_neq(access(path, F_OK), 0, "the target was made before the device was asked");
    o.mem = "hip:7";
    cr_assert_eq(pinio_bench_run(&o, &r, &d), -ENODEV, "%s", d.msg);
    cr_expect(strstr(d.msg, "no hip:7"), "%s", d.msg);
}

Test(bench_gpu, a_failed_copy_is_named)
{
    setenv("FAKE_CUDA_FAIL", "copy:1", 1);
    pinio_bench_opts o;
    pinio_bench_result r;
    pinio_diag d = {0};
    base(&o);
    o.mem = "cuda:0";
    cr_assert_eq(pinio_bench_run(&o, &r, &d), -EIO, "%s", d.msg);
    cr_expect(strstr(d.msg, "--mem cuda:0: the reference copy: cuda: cuMemcpyHtoDAsync_v2 "
                            "failed: CUDA_ERROR_UNKNOWN"), "%s",
              d.msg);
}

Test(bench_gpu, writes_and_bad_names_are_refused)
{
    static const pinio_bench_rw refused[] = {PINIO_BENCH_WRITE, PINIO_BENCH_RANDWRITE,
                                             PINIO_BENCH_RW, PINIO_BENCH_RANDRW,
                                             PINIO_BENCH_TRIM, PINIO_BENCH_RANDTRIM};
    pinio_bench_opts o;
    pinio_diag d = {0};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        base(&o);
        o.rw = refused[i];
        o.mem = "cuda:0";
        cr_expect_eq(pinio_bench_check(&o, &d), -EINVAL, "%s", pinio_bench_rw_name(refused[i]));
        cr_expect(strstr(d.msg, "reads only"), "%s", d.msg);
    }
    static const char *const bad[] = {"gpu0", "cuda:", "cuda:-1", "cuda:x", "hip:1024",
                                      "cuda:0 ", "CUDA:0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        base(&o);
        o.mem = bad[i];
        cr_expect_eq(pinio_bench_check(&o, &d), -EINVAL, "%s", bad[i]);
        cr_expect(strstr(d.msg, "not a destination"), "%s: %s", bad[i], d.msg);
    }
    base(&o);
    o.path = "s3://bucket/key";
    o.mem = "cuda:0";
    cr_expect_eq(pinio_bench_check(&o, &d), -EINVAL);
    cr_expect(strstr(d.msg, "object target"), "%s", d.msg);
    base(&o);
    o.mem = "host";
    cr_expect_eq(pinio_bench_check(&o, &d), 0, "%s", d.msg);
}
