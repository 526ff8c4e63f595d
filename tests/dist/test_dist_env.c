/* Environment detection for each launcher flavour, SLURM node lists, job
 * tokens, and the launcher's argument parsing. Each test sets variables
 * in-process. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dist/env.h"
#include "dist/launch.h"

static const char *all_vars[] = {"RANK",
                                 "WORLD_SIZE",
                                 "LOCAL_RANK",
                                 "LOCAL_WORLD_SIZE",
                                 "MASTER_ADDR",
                                 "MASTER_PORT",
                                 "GROUP_RANK",
                                 "FSDPC_LAUNCHER",
                                 "FSDPC_NODE_RANK",
                                 "FSDPC_NNODES",
                                 "SLURM_PROCID",
                                 "SLURM_NTASKS",
                                 "SLURM_LOCALID",
                                 "SLURM_NTASKS_PER_NODE",
                                 "SLURM_NODEID",
                                 "SLURM_NNODES",
                                 "SLURM_JOB_NODELIST",
                                 "OMPI_COMM_WORLD_RANK",
                                 "OMPI_COMM_WORLD_SIZE",
                                 "OMPI_COMM_WORLD_LOCAL_RANK",
                                 "OMPI_COMM_WORLD_LOCAL_SIZE",
                                 "KUBERNETES_SERVICE_HOST",
                                 "SLURM_JOB_ID",
                                 "SLURM_STEP_ID",
                                 "TORCHELASTIC_RUN_ID",
                                 "FSDPC_JOB_TOKEN",
                                 "FSDPC_JOB_TOKEN_FILE"};

static char g_dir[] = "/tmp/fsdpc-test-env.XXXXXX"; /* the user's secret lives here */

static void clear_env(void) {
  for (size_t i = 0; i < sizeof all_vars / sizeof all_vars[0]; i++)
    unsetenv(all_vars[i]);
}

START_TEST(single_process) {
  clear_env();
  fsdpc_dist_env e;
  fsdpc_err err;
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_OK);
  ck_assert_str_eq(e.source, "single");
  ck_assert_int_eq(e.rank, 0);
  ck_assert_int_eq(e.world_size, 1);
  ck_assert_int_eq(e.nnodes, 1);
  ck_assert_str_eq(e.master_addr, "127.0.0.1");
  ck_assert_int_eq(e.master_port, 29500);
}
END_TEST

START_TEST(torchrun) {
  clear_env();
  setenv("RANK", "5", 1);
  setenv("WORLD_SIZE", "8", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("LOCAL_WORLD_SIZE", "4", 1);
  setenv("MASTER_ADDR", "node7", 1);
  setenv("MASTER_PORT", "29600", 1);
  fsdpc_dist_env e;
  fsdpc_err err;
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_OK);
  ck_assert_str_eq(e.source, "torchrun");
  ck_assert_int_eq(e.rank, 5);
  ck_assert_int_eq(e.world_size, 8);
  ck_assert_int_eq(e.local_rank, 1);
  ck_assert_int_eq(e.local_world_size, 4);
  ck_assert_int_eq(e.node_rank, 1);
  ck_assert_int_eq(e.nnodes, 2);
  ck_assert_str_eq(e.master_addr, "node7");
  ck_assert_int_eq(e.master_port, 29600);
  /* Our own launcher marks itself. */
  setenv("FSDPC_LAUNCHER", "1", 1);
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_OK);
  ck_assert_str_eq(e.source, "fsdpc");
  /* torchrun's agent holds MASTER_PORT: the store moves to the next port,
   * and FSDPC_STORE_PORT pins it. */
  unsetenv("FSDPC_LAUNCHER");
  setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_OK);
  ck_assert_int_eq(e.master_port, 29601);
  setenv("FSDPC_STORE_PORT", "31000", 1);
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_OK);
  ck_assert_int_eq(e.master_port, 31000);
  setenv("FSDPC_STORE_PORT", "0", 1);
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_INVALID_USAGE);
}
END_TEST

START_TEST(torchrun_inconsistent) {
  clear_env();
  fsdpc_dist_env e;
  fsdpc_err err;
  setenv("RANK", "4", 1);
  setenv("WORLD_SIZE", "4", 1);
  setenv("LOCAL_RANK", "0", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_INVALID_USAGE);
  ck_assert_str_eq(err.msg, "environment (torchrun): RANK=4 is outside 0..3 (WORLD_SIZE=4)");
  setenv("RANK", "x3", 1);
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_INVALID_USAGE);
  ck_assert_str_eq(err.msg, "environment: RANK='x3' is not a valid integer");
  setenv("RANK", "1", 1);
  unsetenv("LOCAL_RANK");
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(err.msg, "LOCAL_RANK is not"));
  setenv("LOCAL_RANK", "2", 1);
  setenv("LOCAL_WORLD_SIZE", "2", 1);
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(err.msg, "LOCAL_RANK=2 is outside 0..1"));
  setenv("LOCAL_RANK", "1", 1);
  setenv("MASTER_PORT", "70000", 1);
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(err.msg, "MASTER_PORT=70000"));
  unsetenv("MASTER_PORT");
  unsetenv("MASTER_ADDR");
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(err.msg, "MASTER_ADDR is not set"));
}
END_TEST

START_TEST(slurm) {
  clear_env();
  setenv("SLURM_PROCID", "6", 1);
  setenv("SLURM_NTASKS", "8", 1);
  setenv("SLURM_LOCALID", "2", 1);
  setenv("SLURM_NTASKS_PER_NODE", "4(x2)", 1);
  setenv("SLURM_NODEID", "1", 1);
  setenv("SLURM_NNODES", "2", 1);
  setenv("SLURM_JOB_NODELIST", "gpu[07-08]", 1);
  fsdpc_dist_env e;
  fsdpc_err err;
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_OK);
  ck_assert_str_eq(e.source, "slurm");
  ck_assert_int_eq(e.rank, 6);
  ck_assert_int_eq(e.world_size, 8);
  ck_assert_int_eq(e.local_rank, 2);
  ck_assert_int_eq(e.local_world_size, 4);
  ck_assert_int_eq(e.node_rank, 1);
  ck_assert_int_eq(e.nnodes, 2);
  ck_assert_str_eq(e.master_addr, "gpu07");
  setenv("MASTER_ADDR", "10.0.0.1", 1); /* explicit wins over the node list */
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_OK);
  ck_assert_str_eq(e.master_addr, "10.0.0.1");
  setenv("SLURM_NODEID", "2", 1);
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(err.msg, "node rank 2 is outside 0..1"));
}
END_TEST

START_TEST(slurm_nodelists) {
  char h[64];
  fsdpc_err err;
  ck_assert_int_eq(fsdpc__slurm_first_host("alpha", h, sizeof h, &err), FSDPC_OK);
  ck_assert_str_eq(h, "alpha");
  ck_assert_int_eq(fsdpc__slurm_first_host("alpha,beta", h, sizeof h, &err), FSDPC_OK);
  ck_assert_str_eq(h, "alpha");
  ck_assert_int_eq(fsdpc__slurm_first_host("gpu[003-005,9],cpu1", h, sizeof h, &err), FSDPC_OK);
  ck_assert_str_eq(h, "gpu003");
  ck_assert_int_eq(fsdpc__slurm_first_host("n[5,7]", h, sizeof h, &err), FSDPC_OK);
  ck_assert_str_eq(h, "n5");
  ck_assert_int_eq(fsdpc__slurm_first_host("x[1-2]-ib", h, sizeof h, &err), FSDPC_OK);
  ck_assert_str_eq(h, "x1-ib");
  ck_assert_int_eq(fsdpc__slurm_first_host("bad[1-2", h, sizeof h, &err), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(err.msg, "set MASTER_ADDR"));
  ck_assert_int_eq(fsdpc__slurm_first_host("", h, sizeof h, &err), FSDPC_INVALID_USAGE);
}
END_TEST

START_TEST(mpi) {
  clear_env();
  setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
  fsdpc_dist_env e;
  fsdpc_err err;
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_OK);
  ck_assert_str_eq(e.source, "mpi");
  ck_assert_int_eq(e.rank, 3);
  ck_assert_int_eq(e.world_size, 4);
  ck_assert_int_eq(e.local_rank, 3);
  ck_assert_int_eq(e.nnodes, 1);
  ck_assert_str_eq(e.master_addr, "127.0.0.1");
  /* Two nodes without MASTER_ADDR cannot find rank 0. */
  setenv("OMPI_COMM_WORLD_SIZE", "8", 1);
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(err.msg, "mpirun -x MASTER_ADDR"));
  /* torchrun variables take precedence over a surrounding mpirun/SLURM. */
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  setenv("LOCAL_RANK", "0", 1);
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_OK);
  ck_assert_str_eq(e.source, "torchrun");
}
END_TEST

/* e's layout is the one given. */
static void expect_layout(const fsdpc_dist_env *e, const char *source, int rank, int world,
                          int local, int local_world, int node, int nnodes) {
  ck_assert_str_eq(e->source, source);
  ck_assert_int_eq(e->rank, rank);
  ck_assert_int_eq(e->world_size, world);
  ck_assert_int_eq(e->local_rank, local);
  ck_assert_int_eq(e->local_world_size, local_world);
  ck_assert_int_eq(e->node_rank, node);
  ck_assert_int_eq(e->nnodes, nnodes);
}

/* Issue 42 item 7: Kubeflow's PyTorchJob sets RANK, WORLD_SIZE, MASTER_ADDR
 * and MASTER_PORT in each pod (one process per pod), and no LOCAL_RANK. */
START_TEST(kubeflow) {
  clear_env();
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "4", 1);
  setenv("MASTER_ADDR", "job-master-0", 1);
  setenv("MASTER_PORT", "23456", 1);
  fsdpc_dist_env e;
  fsdpc_err err;
  /* outside a pod a missing LOCAL_RANK stays an error */
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(err.msg, "LOCAL_RANK is not"));
  setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_OK);
  expect_layout(&e, "kubeflow", 3, 4, 0, 1, 3, 4); /* local rank 0 of 1, node = rank */
  ck_assert_str_eq(e.master_addr, "job-master-0");
  ck_assert_int_eq(e.master_port, 23456);
  /* torchrun inside a pod sets LOCAL_RANK: still torchrun */
  setenv("LOCAL_RANK", "1", 1);
  setenv("LOCAL_WORLD_SIZE", "2", 1);
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_OK);
  ck_assert_str_eq(e.source, "torchrun");
  ck_assert_int_eq(e.local_rank, 1);
}
END_TEST

static void write_file(const char *path, const char *text, mode_t mode) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
  ck_assert_int_eq(chmod(path, mode), 0);
}

/* Issue 43 item 9: a job id is public (squeue), so a token is never made of
 * it alone: under SLURM it is keyed by the user's private secret. */
START_TEST(tokens_no_one_else_can_derive) {
  clear_env();
  char s1[256], s2[256], tf[256];
  snprintf(s1, sizeof s1, "%s/secret1", g_dir);
  snprintf(s2, sizeof s2, "%s/secret2", g_dir);
  snprintf(tf, sizeof tf, "%s/token", g_dir);
  setenv("FSDPC_SECRET_FILE", s1, 1);
  setenv("SLURM_PROCID", "1", 1);
  setenv("SLURM_NTASKS", "2", 1);
  setenv("SLURM_LOCALID", "1", 1);
  setenv("SLURM_JOB_ID", "77", 1);
  setenv("SLURM_STEP_ID", "0", 1);
  fsdpc_dist_env e;
  fsdpc_err err;
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_OK);
  ck_assert_str_ne(e.job_token, "slurm-77.0");
  ck_assert_uint_eq(strlen(e.job_token), 32);
  ck_assert_uint_eq(strspn(e.job_token, "0123456789abcdef"), 32);
  struct stat sb; /* the secret was made, private */
  ck_assert_int_eq(stat(s1, &sb), 0);
  ck_assert_int_eq(sb.st_mode & 077, 0);
  char first[FSDPC_JOB_TOKEN_CAP];
  snprintf(first, sizeof first, "%s", e.job_token);
  /* every rank of the job derives the same token ... */
  setenv("SLURM_PROCID", "0", 1);
  setenv("SLURM_LOCALID", "0", 1);
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_OK);
  ck_assert_str_eq(e.job_token, first);
  /* ... another job another one, and another user's secret another one */
  setenv("SLURM_JOB_ID", "78", 1);
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_OK);
  ck_assert_str_ne(e.job_token, first);
  setenv("SLURM_JOB_ID", "77", 1);
  setenv("FSDPC_SECRET_FILE", s2, 1);
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_OK);
  ck_assert_str_ne(e.job_token, first);
  /* a secret others can read is refused */
  ck_assert_int_eq(chmod(s2, 0644), 0);
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(err.msg, "chmod 600"));
  /* FSDPC_JOB_TOKEN_FILE: private, or refused */
  write_file(tf, "tok-from-file\n", 0644);
  setenv("FSDPC_JOB_TOKEN_FILE", tf, 1);
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(err.msg, "readable by others"));
  ck_assert_int_eq(chmod(tf, 0600), 0);
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_OK);
  ck_assert_str_eq(e.job_token, "tok-from-file");
  /* FSDPC_JOB_TOKEN wins */
  setenv("FSDPC_JOB_TOKEN", "given", 1);
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_OK);
  ck_assert_str_eq(e.job_token, "given");
  /* one process needs no secret: random */
  clear_env();
  setenv("SLURM_JOB_ID", "77", 1);
  unsetenv("FSDPC_SECRET_FILE");
  unsetenv("HOME");
  ck_assert_int_eq(fsdpc__dist_env_detect(&e, &err), FSDPC_OK);
  ck_assert_uint_eq(strlen(e.job_token), 32);
  setenv("FSDPC_SECRET_FILE", s1, 1);
}
END_TEST

START_TEST(launch_args) {
  char *argv[] = {"fsdpc",
                  "train",
                  "--nproc-per-node",
                  "4",
                  "cfg.yaml",
                  "--nnodes=2",
                  "--node-rank",
                  "1",
                  "--master-addr",
                  "10.1.2.3",
                  "--master-port=29999",
                  "--steps",
                  "3",
                  NULL};
  int argc = 13;
  fsdpc_launch_opts o;
  fsdpc_err err;
  fsdpc__launch_opts_default(&o);
  ck_assert_int_eq(fsdpc__launch_parse_args(&argc, argv, &o, &err), FSDPC_OK);
  ck_assert_int_eq(argc, 5);
  ck_assert_str_eq(argv[1], "train");
  ck_assert_str_eq(argv[2], "cfg.yaml");
  ck_assert_str_eq(argv[3], "--steps");
  ck_assert_str_eq(argv[4], "3");
  ck_assert_ptr_null(argv[5]);
  ck_assert_int_eq(o.nproc_per_node, 4);
  ck_assert_int_eq(o.nnodes, 2);
  ck_assert_int_eq(o.node_rank, 1);
  ck_assert_str_eq(o.master_addr, "10.1.2.3");
  ck_assert_int_eq(o.master_port, 29999);

  char *bad1[] = {"fsdpc", "--nproc-per-node", "zero", NULL};
  argc = 3;
  ck_assert_int_eq(fsdpc__launch_parse_args(&argc, bad1, &o, &err), FSDPC_INVALID_USAGE);
  ck_assert_str_eq(err.msg, "--nproc-per-node: 'zero' must be an integer in 1..1024");
  char *bad2[] = {"fsdpc", "--nnodes", "2", "--node-rank", "2", NULL};
  argc = 5;
  ck_assert_int_eq(fsdpc__launch_parse_args(&argc, bad2, &o, &err), FSDPC_INVALID_USAGE);
  ck_assert_str_eq(err.msg, "--node-rank 2 must be below --nnodes 2");
  char *bad3[] = {"fsdpc", "--master-port", NULL};
  argc = 2;
  ck_assert_int_eq(fsdpc__launch_parse_args(&argc, bad3, &o, &err), FSDPC_INVALID_USAGE);
  ck_assert_str_eq(err.msg, "--master-port needs a value");
}
END_TEST

START_TEST(launch_refuses_bad_layout_and_missing_program) {
  fsdpc_launch_opts o;
  fsdpc_err err;
  int code = 0;
  fsdpc__launch_opts_default(&o);
  ck_assert_int_eq(fsdpc__launch(&o, &code, &err), FSDPC_INVALID_USAGE); /* no argv */
  char *argv[] = {"/nonexistent/fsdpc-no-such-program", NULL};
  o.argv = argv;
  o.nproc_per_node = 2;
  o.master_port = 0;
  ck_assert_int_eq(fsdpc__launch(&o, &code, &err), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(
      strstr(err.msg, "cannot run '/nonexistent/fsdpc-no-such-program' for rank 0"));
  ck_assert_int_ne(code, 0);
  o.nnodes = 2;
  ck_assert_int_eq(fsdpc__launch(&o, &code, &err), FSDPC_INVALID_USAGE);
  ck_assert_ptr_nonnull(strstr(err.msg, "explicit --master-port"));
  /* A trivial command on 3 ranks succeeds; a failing one is named. */
  char *t[] = {"true", NULL};
  o.argv = t;
  o.nnodes = 1;
  o.nproc_per_node = 3;
  ck_assert_int_eq(fsdpc__launch(&o, &code, &err), FSDPC_OK);
  ck_assert_int_eq(code, 0);
  char *f[] = {"sh", "-c", "[ \"$RANK\" = 1 ] && exit 3; sleep 30", NULL};
  o.argv = f;
  ck_assert_int_eq(fsdpc__launch(&o, &code, &err), FSDPC_SYSTEM_ERROR);
  ck_assert_int_eq(code, 3);
  ck_assert_ptr_nonnull(strstr(err.msg, "rank 1 (pid "));
  ck_assert_ptr_nonnull(strstr(err.msg, ") died: exited with code 3"));
}
END_TEST

int main(void) {
  /* the user's secret of every test lives in a private temporary folder */
  if (!mkdtemp(g_dir))
    return 1;
  char secret[256];
  snprintf(secret, sizeof secret, "%s/secret1", g_dir);
  setenv("FSDPC_SECRET_FILE", secret, 1);
  Suite *s = suite_create("dist_env");
  TCase *tc = tcase_create("env");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, single_process);
  tcase_add_test(tc, torchrun);
  tcase_add_test(tc, torchrun_inconsistent);
  tcase_add_test(tc, slurm);
  tcase_add_test(tc, slurm_nodelists);
  tcase_add_test(tc, mpi);
  tcase_add_test(tc, kubeflow);
  tcase_add_test(tc, tokens_no_one_else_can_derive);
  tcase_add_test(tc, launch_args);
  tcase_add_test(tc, launch_refuses_bad_layout_and_missing_program);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  const char *files[] = {"secret1", "secret2", "token"};
  for (int i = 0; i < 3; i++) {
    char p[300];
    snprintf(p, sizeof p, "%s/%s", g_dir, files[i]);
    unlink(p);
  }
  rmdir(g_dir);
  return failed ? 1 : 0;
}
