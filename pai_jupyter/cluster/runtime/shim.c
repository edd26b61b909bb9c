/* pai_jupyter task shim for the process runtime. The runtime starts `pai-shim` (in a new session, so it leads
 * the task's process group), puts it into the task's cgroups, and writes the task to its stdin:
 *
 *     TASK_DIR \0 WORK_DIR \0 NOTICE \0 KEY=VALUE \0 KEY=VALUE \0 ...      then end-of-file
 *
 * The shim runs TASK_DIR/command.sh with /bin/sh in WORK_DIR with exactly that environment, writes NOTICE and
 * then the command's stdout and stderr into TASK_DIR/stdout and stderr and both, in the order they arrive, into
 * TASK_DIR/all, writes its pid to TASK_DIR/pid, and once the logs are complete writes the command's status
 * (128+N for signal N) to TASK_DIR/exit_code (atomically) and exits with it. End-of-file with nothing written
 * means the daemon went away before it had a task for this shim: it exits 0.
 *
 * The same files as shim.sh (the fallback without a C compiler, and the Docker runtime's shim), so recovery
 * and the logs do not care which one ran a task. Why C: shim.sh costs two shells, a subshell and two tees per
 * task; this is one exec and a fork. Why stdin: the runtime can start shims ahead of their tasks ("warm"),
 * because on cgroup v1 moving a process into a cgroup waits for an RCU grace period (5-40 ms measured), and the
 * environment (secrets included) never touches the disk. The command is forked before the shim's own files
 * are written: they are not on the way to the command's start. Like conmon or containerd-shim, the shim
 * outlives the daemon, so a task keeps running and logging while the daemon restarts.
 *
 * Stop: SIGTERM to the group must reach the command, never the shim. The shim blocks it from its first
 * instruction and the command unblocks it just before its exec, so one that comes in between stays pending and
 * still ends the command. When the command is done the group gets SIGTERM so that no background child outlives
 * it; the shim then drains the pipes until they close or DRAIN_SECONDS pass (a child that ignores SIGTERM
 * cannot hold the task open; the runtime kills what is left of the group once the shim has exited). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DRAIN_SECONDS 5

static int wake[2] = {-1, -1}; /* self-pipe: SIGCHLD -> poll() */
static const char *dir;       /* TASK_DIR */

static void on_child(int sig) {
    int saved = errno;
    (void)sig;
    if (write(wake[1], "c", 1) < 0) { /* full pipe: a wake-up is pending anyway */ }
    errno = saved;
}

static void block_term(int how) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigprocmask(how, &set, NULL);
}

static void put(int fd, const char *buf, size_t n) {
    while (n > 0 && fd >= 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return;
        }
        buf += w;
        n -= (size_t)w;
    }
}

static int open_in(const char *name, int flags) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) return -1;
    return open(path, flags | O_CLOEXEC, 0644);
}

static void write_file(const char *name, const char *text) {
    int fd = open_in(name, O_WRONLY | O_CREAT | O_TRUNC);
    if (fd >= 0) {
        put(fd, text, strlen(text));
        close(fd);
    }
}

/* The exit status, written to exit_code.tmp and renamed: a reader never sees a partial one. */
static void write_exit_code(int rc) {
    char text[16], from[PATH_MAX], to[PATH_MAX];
    snprintf(text, sizeof text, "%d\n", rc);
    write_file("exit_code.tmp", text);
    snprintf(from, sizeof from, "%s/exit_code.tmp", dir);
    snprintf(to, sizeof to, "%s/exit_code", dir);
    rename(from, to);
}

/* A start that failed before the command could run, recorded as the runtime reads it (exit 127). */
static int fail_start(const char *what, const char *arg) {
    char msg[2 * PATH_MAX];
    int m = snprintf(msg, sizeof msg, "pai-shim: %s %s: %s\n", what, arg, strerror(errno));
    const char *names[] = {"stderr", "all"};
    for (int i = 0; i < 2; i++) {
        int fd = open_in(names[i], O_WRONLY | O_CREAT | O_APPEND);
        if (fd >= 0 && m > 0) put(fd, msg, (size_t)m);
        if (fd >= 0) close(fd);
    }
    write_exit_code(127);
    return 127;
}

/* All of stdin, NUL-terminated; NULL on error. */
static char *read_stdin(size_t *size) {
    size_t cap = 16384, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            char *more = realloc(buf, cap *= 2);
            if (!more) break;
            buf = more;
        }
        ssize_t r = read(0, buf + n, cap - n - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) break;
        if (r == 0) {
            buf[n] = '\0';
            *size = n;
            return buf;
        }
        n += (size_t)r;
    }
    free(buf);
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    block_term(SIG_BLOCK);
    if (argc != 1) {
        fprintf(stderr, "usage: pai-shim < TASK (written by pai_jupyter's process runtime; see shim.c)\n");
        (void)argv;
        return 2;
    }
    size_t size = 0;
    char *msg = read_stdin(&size);
    if (!msg) return 2;
    if (size == 0) return 0; /* no task came */
    char *fields[3];
    size_t at = 0;
    for (int i = 0; i < 3; i++) {
        if (at >= size) return 2;
        fields[i] = msg + at;
        at += strlen(msg + at) + 1;
    }
    dir = fields[0];
    const char *cwd = fields[1], *notice = fields[2];
    size_t count = 0;
    for (size_t i = at; i < size; i++) count += msg[i] == '\0';
    char **envp = calloc(count + 1, sizeof *envp);
    if (!envp) return fail_start("out of memory for the environment of", dir);
    for (size_t k = 0; at < size; at += strlen(msg + at) + 1)
        if (msg[at]) envp[k++] = msg + at;
    if (chdir(cwd)) return fail_start("could not change to the working directory", cwd);
    int nul = open("/dev/null", O_RDONLY);
    if (nul > 0) {
        dup2(nul, 0);
        close(nul);
    }

    char command[PATH_MAX];
    if (snprintf(command, sizeof command, "%s/command.sh", dir) >= (int)sizeof command) {
        errno = ENAMETOOLONG;
        return fail_start("the task directory's name is too long:", dir);
    }
    int po[2], pe[2];
    if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) || pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC))
        return fail_start("could not make pipes for", dir);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_child;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, NULL);

    pid_t child = fork();
    if (child < 0) return fail_start("could not fork for", dir);
    if (child == 0) {
        signal(SIGCHLD, SIG_DFL);
        dup2(po[1], 1);
        dup2(pe[1], 2);
        block_term(SIG_UNBLOCK);
        char *args[] = {"sh", command, NULL};
        execve("/bin/sh", args, envp);
        dprintf(2, "pai-shim: could not run /bin/sh: %s\n", strerror(errno));
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);

    /* The shim's own files, while the command starts. */
    char pid[32];
    snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    write_file("pid", pid);
    int out = open_in("stdout", O_WRONLY | O_CREAT | O_APPEND);
    int err = open_in("stderr", O_WRONLY | O_CREAT | O_APPEND);
    int all = open_in("all", O_WRONLY | O_CREAT | O_APPEND);
    put(out, notice, strlen(notice));
    put(all, notice, strlen(notice));

    struct pollfd fds[3] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}, {wake[0], POLLIN, 0}};
    int sinks[2] = {out, err};
    int rc = -1;
    double deadline = 0;
    char buf[65536];
    while (rc < 0 || fds[0].fd >= 0 || fds[1].fd >= 0) {
        int timeout = -1;
        if (rc >= 0) {
            double left = deadline - now();
            if (left <= 0) break; /* something that ignored SIGTERM still holds a pipe: stop waiting for it */
            timeout = (int)(left * 1000) + 1;
        }
        if (poll(fds, 3, timeout) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t n = read(fds[i].fd, buf, sizeof buf);
            if (n > 0) {
                put(sinks[i], buf, (size_t)n);
                put(all, buf, (size_t)n);
            } else if (n == 0 || errno != EINTR) {
                close(fds[i].fd);
                fds[i].fd = -1;
            }
        }
        if (fds[2].revents & POLLIN) {
            while (read(wake[0], buf, sizeof buf) > 0) {}
        }
        int status;
        if (rc < 0 && waitpid(child, &status, WNOHANG) == child) {
            rc = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
            kill(0, SIGTERM); /* background children of the command: the task is over */
            deadline = now() + DRAIN_SECONDS;
        }
    }
    if (rc < 0) rc = 255;
    write_exit_code(rc);
    return rc;
}
