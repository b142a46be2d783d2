/* The test helpers themselves: a pattern window checks against the whole
 * stream, a changed byte is found where it is, and t_rm_rf leaves nothing. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/common/helpers.h"

Test(helpers, pattern_windows_match_the_stream)
{
    uint8_t all[1000], win[487];
    t_pattern_fill(all, sizeof(all), 7, 0);
    t_pattern_fill(win, sizeof(win), 7, 13);
    cr_assert_eq(memcmp(all + 13, win, sizeof(win)), 0, "any window is the stream's bytes");
    cr_assert(t_pattern_check(all + 13, sizeof(win), 7, 13, NULL));
    cr_assert_not(t_pattern_check(all, sizeof(all), 8, 0, NULL), "another seed differs");
    size_t bad = 0;
    all[600] ^= 1;
    cr_assert_not(t_pattern_check(all, sizeof(all), 7, 0, &bad));
    cr_assert_eq(bad, 600);
}

Test(helpers, tmpfile_holds_the_pattern_and_rm_rf_removes_a_tree)
{
    char dir[256], path[300], sub[300];
    cr_assert_eq(t_tmpdir("/var/tmp", "helpers", dir, sizeof(dir)), 0);
    cr_assert_eq(t_tmpfile(dir, "f", NULL, 100000, 3, path, sizeof(path)), 0);
    static uint8_t buf[100000];
    int fd = open(path, O_RDONLY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(read(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
    close(fd);
    cr_assert(t_pattern_check(buf, sizeof(buf), 3, 0, NULL));
    snprintf(sub, sizeof(sub), "%s/a", dir);
    cr_assert_eq(mkdir(sub, 0700), 0);
    cr_assert_eq(t_tmpfile(sub, "g", "xyz", 3, 0, path, sizeof(path)), 0);
    cr_assert_eq(symlink("/etc/passwd", strcat(sub, "/link")), 0);
    cr_assert_eq(t_rm_rf(dir), 0);
    struct stat st;
    cr_assert_neq(stat(dir, &st), 0, "the tree is gone");
    cr_assert_eq(stat("/etc/passwd", &st), 0, "a symlink's target is not followed");
    cr_assert_eq(t_rm_rf(dir), 0, "removing what is gone is not an error");
}
