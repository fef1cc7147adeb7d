/*
 * plot.h - PNG plots through gnuplot (Debian gnuplot-nox: the pngcairo terminal), driven by popen
 * with the data in a temporary file. A missing gnuplot is a clear error (LSSAR_E_UNSUPPORTED)
 * saying how to install it; callers still write their JSON and tables.
 */
#ifndef LSSAR_PLOT_H
#define LSSAR_PLOT_H

typedef struct {
    const char *name;
    int n;
    const double *x, *y, *err;   // err may be NULL; NaN points are skipped
} plot_series;

/* Lines with error bars; log2x: log2 x axis. */
int plot_lines(const char *png, const char *title, const char *xlabel, const char *ylabel, int log2x,
               const plot_series *s, int ns);
/* Heatmap of v (rows x cols, row-major) with labelled axes; values in [vmin, vmax]. */
int plot_heatmap(const char *png, const char *title, const char *xlabel, const char *ylabel,
                 int rows, const double *rowval, int cols, const double *colval, const double *v,
                 double vmin, double vmax);
/* Scatter of columns xcol against ycol (1-based) of each CSV file (header row skipped), log-log,
   with the line y = x: predicted against true values. */
int plot_csv_loglog(const char *png, const char *title, const char *xlabel, const char *ylabel,
                    const char *const *csv, const char *const *names, int n, int xcol, int ycol);
/* 1 if gnuplot runs. */
int plot_available(void);

#endif
