// plot.c - gnuplot PNG plots; see plot.h.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/util.h"
#include "exp/plot.h"


int plot_available(void) {
    return system("gnuplot -e 'set terminal pngcairo' </dev/null >/dev/null 2>&1") == 0;
}

static int need_gnuplot(const char *png) {
    if (plot_available()) return 0;
    return lssar_fail(LSSAR_E_UNSUPPORTED,
                      "cannot write %s: gnuplot with the pngcairo terminal is not installed (apt-get install "
                      "gnuplot-nox, or run scripts/deps.sh)",
                      png);
}

// Quote a string for a gnuplot double-quoted literal (drop quotes and backslashes).
static void gq(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) if (*s != '"' && *s != '\\') fputc(*s, f);
    fputc('"', f);
}

// The lines every plot starts with: PNG terminal, output file, title and axis labels.
static void gp_header(FILE *f, const char *png, const char *title, const char *xlabel, const char *ylabel) {
    fprintf(f, "set terminal pngcairo size 900,600 enhanced font 'sans,11'\nset output ");
    gq(f, png);
    fprintf(f, "\nset title "); gq(f, title);
    fprintf(f, "\nset xlabel "); gq(f, xlabel);
    fprintf(f, "\nset ylabel "); gq(f, ylabel);
}

static int run_script(const char *png, const char *script_path) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "gnuplot '%s' 2>&1", script_path);
    FILE *p = popen(cmd, "r");
    if (!p) return lssar_fail(LSSAR_E_IO, "cannot run gnuplot for %s", png);
    char line[512], first[512] = "";
    while (fgets(line, sizeof line, p)) if (!first[0]) snprintf(first, sizeof first, "%s", line);
    int st = pclose(p);
    if (st != 0) return lssar_fail(LSSAR_E_IO, "gnuplot failed on %s: %s", png, first);
    return 0;
}

static int tmpfile_path(char *buf, size_t n, const char *tag) {
    snprintf(buf, n, "/tmp/lssar-plot-%s-XXXXXX", tag);
    int fd = mkstemp(buf);
    if (fd < 0) return lssar_fail(LSSAR_E_IO, "cannot create a temporary file for a plot");
    close(fd);
    return 0;
}

// The temporary files of one plot (paths of 256 bytes): the gnuplot script gp, opened as *script
// with the header written, and, unless dat is NULL, a data file opened as *data. On failure
// nothing is left behind.
static int plot_begin(const char *png, const char *title, const char *xlabel, const char *ylabel,
                      char *dat, FILE **data, char *gp, FILE **script) {
    int rc = need_gnuplot(png);
    if (rc || (rc = tmpfile_path(gp, 256, "gp"))) return rc;
    if (dat && (rc = tmpfile_path(dat, 256, "dat"))) { unlink(gp); return rc; }
    *script = fopen(gp, "w");
    if (dat) *data = fopen(dat, "w");
    if (!*script || (dat && !*data)) {
        if (*script) fclose(*script);
        if (dat && *data) fclose(*data);
        unlink(gp);
        if (dat) unlink(dat);
        return lssar_fail(LSSAR_E_IO, "cannot write the temporary files of %s", png);
    }
    gp_header(*script, png, title, xlabel, ylabel);
    return 0;
}

// Close the script (the data file must be closed already), run it, remove the temporary files.
static int plot_end(const char *png, const char *dat, const char *gp, FILE *script) {
    fclose(script);
    int rc = run_script(png, gp);
    if (dat) unlink(dat);
    unlink(gp);
    return rc;
}

int plot_lines(const char *png, const char *title, const char *xlabel, const char *ylabel, int log2x,
               const plot_series *s, int ns) {
    char dat[256], gp[256];
    FILE *f, *g;
    int rc = plot_begin(png, title, xlabel, ylabel, dat, &f, gp, &g);
    if (rc) return rc;
    for (int i = 0; i < ns; i++) {
        fprintf(f, "# %s\n", s[i].name);
        int any = 0;
        for (int j = 0; j < s[i].n; j++) {
            if (!isfinite(s[i].y[j])) continue;
            fprintf(f, "%.10g %.10g %.10g\n", s[i].x[j], s[i].y[j], s[i].err ? s[i].err[j] : 0.0);
            any = 1;
        }
        if (!any) fprintf(f, "nan nan nan\n");
        fprintf(f, "\n\n");
    }
    fclose(f);
    fprintf(g, "\nset grid\nset key below\n");
    if (log2x) fprintf(g, "set logscale x 2\n");
    fprintf(g, "plot ");
    for (int i = 0; i < ns; i++) {
        fprintf(g, "%s'%s' index %d using 1:2:3 with yerrorlines lw 2 title ", i ? ", " : "", dat, i);
        gq(g, s[i].name);
    }
    fprintf(g, "\n");
    return plot_end(png, dat, gp, g);
}

int plot_heatmap(const char *png, const char *title, const char *xlabel, const char *ylabel,
                 int rows, const double *rowval, int cols, const double *colval, const double *v,
                 double vmin, double vmax) {
    char dat[256], gp[256];
    FILE *f, *g;
    int rc = plot_begin(png, title, xlabel, ylabel, dat, &f, gp, &g);
    if (rc) return rc;
    // matrix with cell indices; the tick labels carry the real values
    for (int r = 0; r < rows; r++) {
        for (int c = 0; c < cols; c++) fprintf(f, "%d %d %.6g\n", c, r, v[(size_t)r * cols + c]);
        fprintf(f, "\n");
    }
    fclose(f);
    fprintf(g, "\nset cbrange [%g:%g]\nset palette defined (0 '#b2182b', 0.5 '#f7f7f7', 1 '#2166ac')\n", vmin,
            vmax);
    fprintf(g, "set xrange [-0.5:%g]\nset yrange [-0.5:%g]\n", cols - 0.5, rows - 0.5);
    fprintf(g, "set xtics (");
    for (int c = 0; c < cols; c++) fprintf(g, "%s\"%g\" %d", c ? ", " : "", colval[c], c);
    fprintf(g, ")\nset ytics (");
    for (int r = 0; r < rows; r++) fprintf(g, "%s\"%g\" %d", r ? ", " : "", rowval[r], r);
    fprintf(g,
            ")\nplot '%s' using 1:2:3 with image notitle, '%s' using 1:2:(sprintf('%%.2f',$3)) with labels "
            "notitle\n",
            dat, dat);
    return plot_end(png, dat, gp, g);
}

int plot_csv_loglog(const char *png, const char *title, const char *xlabel, const char *ylabel,
                    const char *const *csv, const char *const *names, int n, int xcol, int ycol) {
    for (int i = 0; i < n; i++)  // gnuplot would warn and draw the plot without it
        if (access(csv[i], R_OK))
            return lssar_fail(LSSAR_E_IO, "cannot plot %s: %s cannot be read", png, csv[i]);
    char gp[256];
    FILE *g;
    int rc = plot_begin(png, title, xlabel, ylabel, NULL, NULL, gp, &g);
    if (rc) return rc;
    fprintf(g, "\nset datafile separator ','\nset logscale xy\nset format x '10^{%%L}'\nset format y "
               "'10^{%%L}'\n"
               "set grid\nset key top left\nplot x title 'y = x' lc rgb 'black'");
    for (int i = 0; i < n; i++) {
        fprintf(g, ", ");
        gq(g, csv[i]);
        fprintf(g, " every ::1 using %d:%d with points pt 7 ps 0.4 title ", xcol, ycol);
        gq(g, names[i]);
    }
    fprintf(g, "\n");
    return plot_end(png, NULL, gp, g);
}
