/* test_output.c — core/output.h: where an output path goes. Each case would
 * have failed on the old write (a temporary file renamed over whatever the
 * path named): a device or FIFO written through, a symlink followed, a
 * read-only file refused without force, a regular file replaced atomically
 * with its mode kept, and nothing left behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/output.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/mp-output-test-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void in_dir(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", dir, name);
}

static char *slurp(const char *path)
{
    char *text = NULL;
    size_t len;
    mp_error err;
    assert_int_equal(mp_read_file(path, 1 << 20, &text, &len, &err), MP_OK);
    return text;
}

static void test_standard_streams(void **state)
{
    (void)state;
    mp_output o;
    mp_error err;
    const char *names[] = {"-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(mp_output_prepare(names[i], false, &o, &err), MP_OK);
        assert_int_equal(o.kind, MP_OUT_FD);
        assert_int_equal(o.fd, 1);
    }
    assert_int_equal(mp_output_prepare("/dev/stderr", false, &o, &err), MP_OK);
    assert_int_equal(o.fd, 2);
}

static void test_device_written_through(void **state)
{
    (void)state;
    mp_output o;
    mp_error err;
    assert_int_equal(mp_output_prepare("/dev/null", false, &o, &err), MP_OK);
    assert_int_equal(o.kind, MP_OUT_STREAM);
    assert_int_equal(mp_output_write(&o, "x\n", 2, &err), MP_OK);
    struct stat st;
    assert_int_equal(stat("/dev/null", &st), 0);
    assert_true(S_ISCHR(st.st_mode));
    /* a device that refuses: the error comes back, the device stays */
    if (stat("/dev/full", &st) == 0) {
        assert_int_equal(mp_output_write_path("/dev/full", false, "x\n", 2, &err), MP_EIO);
        assert_non_null(strstr(err.msg, "cannot write"));
        assert_int_equal(stat("/dev/full", &st), 0);
        assert_true(S_ISCHR(st.st_mode));
    }
}

static void test_fifo_written_through(void **state)
{
    (void)state;
    char fifo[128];
    in_dir(fifo, sizeof fifo, "fifo");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    /* a reader that is already there (non-blocking open), so the write
     * does not wait; the pipe holds the few bytes */
    int rd = open(fifo, O_RDONLY | O_NONBLOCK);
    assert_true(rd >= 0);
    mp_error err;
    assert_int_equal(mp_output_write_path(fifo, false, "plan\n", 5, &err), MP_OK);
    char got[8] = {0};
    assert_int_equal(read(rd, got, sizeof got - 1), 5);
    assert_string_equal(got, "plan\n");
    close(rd);
    struct stat st;
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
}

static void test_symlink_followed(void **state)
{
    (void)state;
    char target[128], link[128], dangling[128], created[128];
    in_dir(target, sizeof target, "target.yaml");
    in_dir(link, sizeof link, "link.yaml");
    in_dir(dangling, sizeof dangling, "dangling.yaml");
    in_dir(created, sizeof created, "created.yaml");
    FILE *f = fopen(target, "w");
    assert_non_null(f);
    fputs("old\n", f);
    fclose(f);
    assert_int_equal(symlink("target.yaml", link), 0); /* relative to its folder */
    mp_error err;
    assert_int_equal(mp_output_write_path(link, false, "new\n", 4, &err), MP_OK);
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    char *text = slurp(target);
    assert_string_equal(text, "new\n");
    free(text);
    /* a dangling link: the file it names is made */
    assert_int_equal(symlink("created.yaml", dangling), 0);
    assert_int_equal(mp_output_write_path(dangling, false, "made\n", 5, &err), MP_OK);
    assert_int_equal(lstat(dangling, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    text = slurp(created);
    assert_string_equal(text, "made\n");
    free(text);
}

static void test_read_only_needs_force(void **state)
{
    (void)state;
    char ro[128];
    in_dir(ro, sizeof ro, "ro.yaml");
    FILE *f = fopen(ro, "w");
    assert_non_null(f);
    fputs("keep\n", f);
    fclose(f);
    assert_int_equal(chmod(ro, 0444), 0);
    mp_output o;
    mp_error err;
    assert_int_equal(mp_output_prepare(ro, false, &o, &err), MP_EINPUT);
    assert_non_null(strstr(err.msg, "read-only"));
    assert_non_null(strstr(err.file, "ro.yaml"));
    char *text = slurp(ro);
    assert_string_equal(text, "keep\n");
    free(text);
    assert_int_equal(mp_output_write_path(ro, true, "forced\n", 7, &err), MP_OK);
    text = slurp(ro);
    assert_string_equal(text, "forced\n");
    free(text);
    struct stat st;
    assert_int_equal(stat(ro, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0444); /* still read-only */
}

static void test_regular_file_and_folder(void **state)
{
    (void)state;
    char path[128], sub[128];
    in_dir(path, sizeof path, "plan.yaml");
    in_dir(sub, sizeof sub, "sub");
    mp_output o;
    mp_error err;
    assert_int_equal(mp_output_prepare(path, false, &o, &err), MP_OK);
    assert_int_equal(o.kind, MP_OUT_FILE);
    assert_int_equal(mp_output_write(&o, "one\n", 4, &err), MP_OK);
    assert_int_equal(chmod(path, 0640), 0);
    assert_int_equal(mp_output_write_path(path, false, "two\n", 4, &err), MP_OK);
    char *text = slurp(path);
    assert_string_equal(text, "two\n");
    free(text);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    assert_int_equal(mkdir(sub, 0755), 0);
    assert_int_equal(mp_output_prepare(sub, false, &o, &err), MP_EINPUT);
    assert_non_null(strstr(err.msg, "folder"));
    /* a missing folder: MP_EIO, and no temporary file anywhere */
    char missing[160];
    in_dir(missing, sizeof missing, "no/such/file");
    assert_int_equal(mp_output_write_path(missing, false, "x", 1, &err), MP_EIO);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q '\\.tmp\\.'", dir);
    assert_int_not_equal(system(cmd), 0);
}

/* A new file's folder is checked when the output is prepared, before the
 * work it holds (exec ran every step and then failed on a missing --trace
 * folder, under mpirun's lines): a missing folder, a file where the folder
 * should be, a dangling link into a missing folder. */
static void test_missing_folder_refused_early(void **state)
{
    (void)state;
    char missing[160], notdir[160], file[160], link[160];
    in_dir(missing, sizeof missing, "nodir/t.json");
    in_dir(file, sizeof file, "afile");
    in_dir(notdir, sizeof notdir, "afile/t.json");
    in_dir(link, sizeof link, "dangling.json");
    mp_output o;
    mp_error err;
    assert_int_equal(mp_output_prepare(missing, false, &o, &err), MP_EIO);
    assert_non_null(strstr(err.msg, "No such file or directory"));
    assert_string_equal(err.file, missing);
    assert_int_equal(mp_output_write_path(file, false, "x\n", 2, &err), MP_OK);
    assert_int_equal(mp_output_prepare(notdir, false, &o, &err), MP_EIO);
    assert_non_null(strstr(err.msg, "Not a directory"));
    assert_int_equal(symlink("nodir/target.json", link), 0);
    assert_int_equal(mp_output_prepare(link, false, &o, &err), MP_EIO);
    /* what is fine stays fine: a new file in an existing folder, by a relative name too */
    assert_int_equal(mp_output_prepare(file, false, &o, &err), MP_OK);
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(dir), 0);
    assert_int_equal(mp_output_prepare("new.json", false, &o, &err), MP_OK);
    assert_int_equal(chdir(cwd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_standard_streams),
        cmocka_unit_test(test_device_written_through),
        cmocka_unit_test(test_fifo_written_through),
        cmocka_unit_test(test_symlink_followed),
        cmocka_unit_test(test_read_only_needs_force),
        cmocka_unit_test(test_regular_file_and_folder),
        cmocka_unit_test(test_missing_folder_refused_early),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
