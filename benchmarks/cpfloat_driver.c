/* Times CPFloat's cpfloatf on float32 values from a file, for bench_round.py.
 *
 *   cpfloat_driver FILE N PRECISION EMIN EMAX INFINITY ROUND REPEATS
 *
 * FILE holds N float32 values (raw, native byte order); PRECISION counts the
 * implicit bit; ROUND is CPFloat's cpfloat_rounding_t. Each call alternates with
 * a memcpy of the same bytes into the same output (the limit, timed in the same
 * moments). Prints the median time of REPEATS calls in seconds, the first
 * result's bits (a check that it ran), the best time, and the best and median
 * times of the memcpy.
 * Built by bench_round.py against CPFloat's header-only sources, one thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpfloat_binary32.h"

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc != 9) {
    fprintf(stderr, "usage: %s FILE N PRECISION EMIN EMAX INFINITY ROUND REPEATS\n", argv[0]);
    return 2;
  }
  size_t n = strtoull(argv[2], NULL, 10);
  int repeats = atoi(argv[8]);
  float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
  double *times = malloc((repeats > 0 ? repeats : 1) * sizeof(double));
  double *copies = malloc((repeats > 0 ? repeats : 1) * sizeof(double));
  FILE *f = fopen(argv[1], "rb");
  if (!f || fread(x, sizeof(float), n, f) != n) {
    fprintf(stderr, "cannot read %zu float32 values from %s\n", n, argv[1]);
    return 2;
  }
  fclose(f);
  optstruct *opts = init_optstruct();
  strcpy(opts->format, "custom");
  opts->precision = atoi(argv[3]);
  opts->emin = atoi(argv[4]);
  opts->emax = atoi(argv[5]);
  opts->explim = CPFLOAT_EXPRANGE_TARG;
  opts->infinity = atoi(argv[6]) ? CPFLOAT_INF_USE : CPFLOAT_INF_NO;
  opts->round = (cpfloat_rounding_t)atoi(argv[7]);
  opts->saturation = CPFLOAT_SAT_NO;
  opts->subnormal = CPFLOAT_SUBN_USE;
  opts->flip = CPFLOAT_SOFTERR_NO;
  opts->p = 0;
  if (cpfloatf(y, x, n, opts)) {  /* warm-up, and the parameters' check */
    fprintf(stderr, "CPFloat refused the parameters\n");
    return 3;
  }
  for (int r = 0; r < repeats; r++) {
    struct timespec t0, t1, t2;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    memcpy(y, x, n * sizeof(float));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    cpfloatf(y, x, n, opts);
    clock_gettime(CLOCK_MONOTONIC, &t2);
    copies[r] = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
    times[r] = (t2.tv_sec - t1.tv_sec) + 1e-9 * (t2.tv_nsec - t1.tv_nsec);
  }
  qsort(times, repeats, sizeof(double), cmp);
  qsort(copies, repeats, sizeof(double), cmp);
  unsigned int bits;
  memcpy(&bits, y, sizeof bits);
  printf("%.9f %08x %.9f %.9f %.9f\n", times[repeats / 2], bits, times[0], copies[0],
         copies[repeats / 2]);
  free_optstruct(opts);
  return 0;
}
