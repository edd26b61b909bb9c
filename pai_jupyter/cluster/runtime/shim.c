/* pai_jupyter task shim for the process runtime: pai-shim DIR
 *
 * Started by the runtime in a new session (so it leads the task's process group) and put into the task's
 * cgroups, the shim first makes its files in DIR: stdout, all and an empty exit_code (stderr only when something
 * is written to it), and writes one byte to its stdout to say it is ready. Then it waits for its task on stdin:
 *
 *     TASK_DIR \0 WORK_DIR \0 NOTICE \0 KEY=VALUE \0 KEY=VALUE \0 ...      then end-of-file
 *
 * TASK_DIR is DIR itself, or DIR renamed by the runtime meanwhile (the shim's files stay open across a rename).
 * It runs TASK_DIR/command.sh with /bin/sh in WORK_DIR with exactly that environment, writes NOTICE and then the
 * command's stdout and stderr into stdout and stderr and both, in the order they arrive, into all, and once the
 * logs are complete writes the command's status (128+N for signal N) into exit_code (empty until then) and exits
 * with it. End-of-file with nothing written means the daemon went away before it had a task for this shim: it
 * exits 0.
 *
 * The same files as shim.sh (the fallback without a C compiler, and the Docker runtime's shim), so recovery
 * and the logs do not care which one ran a task. Why C: shim.sh costs two shells, a subshell and two tees per
 * task; this is one exec and a fork. Why the wait: the runtime starts shims ahead of their tasks ("warm", see
 * warm.py) in a ready task directory, because creating files and directories costs up to a millisecond each
 * on some disks, and on cgroup v1 moving a process into a cgroup waits for an RCU grace period (5-40 ms
 * measured); the environment (secrets included) never touches the disk. Like conmon or containerd-shim, the
 * shim outlives the daemon, so a task keeps running and logging while the daemon restarts.
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
static int out = -1, err = -1, all = -1, code = -1, dirfd = -1;

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

/* stderr is made when there is something for it: most tasks never write to it, and a file costs. */
static int stderr_fd(void) {
    if (err < 0 && dirfd >= 0) err = openat(dirfd, "stderr", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    return err;
}

static int open_in(const char *dir, const char *name, int flags) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) return -1;
    return open(path, flags | O_CLOEXEC, 0644);
}

/* The exit status into the (empty) exit_code: one small write, so a reader sees nothing or all of it. */
static int finish(int rc) {
    char text[16];
    int len = snprintf(text, sizeof text, "%d\n", rc);
    if (code >= 0 && pwrite(code, text, (size_t)len, 0) < 0) { /* nothing more to do */ }
    return rc;
}

/* A start that failed before the command could run, recorded as the runtime reads it (exit 127). */
static int fail_start(const char *what, const char *arg) {
    char msg[2 * PATH_MAX];
    int m = snprintf(msg, sizeof msg, "pai-shim: %s %s: %s\n", what, arg, strerror(errno));
    if (m > 0) {
        put(stderr_fd(), msg, (size_t)m);
        put(all, msg, (size_t)m);
    }
    return finish(127);
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
    if (argc != 2) {
        fprintf(stderr, "usage: pai-shim DIR < TASK (started by pai_jupyter's process runtime; see shim.c)\n");
        return 2;
    }
    const char *dir = argv[1];
    dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC); /* follows the directory if it is renamed */
    out = open_in(dir, "stdout", O_WRONLY | O_CREAT | O_APPEND);
    all = open_in(dir, "all", O_WRONLY | O_CREAT | O_APPEND);
    code = open_in(dir, "exit_code", O_WRONLY | O_CREAT | O_TRUNC);
    if (dirfd < 0 || out < 0 || all < 0 || code < 0) {
        perror("pai-shim: cannot make the task's files");
        return 2;
    }
    put(1, "\n", 1); /* ready: the files are made, the directory may be renamed */
    int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (nul >= 0) dup2(nul, 1);

    size_t size = 0;
    char *msg = read_stdin(&size);
    if (!msg) return fail_start("could not read its task from", "stdin");
    if (size == 0) return 0; /* no task came */
    if (nul >= 0) dup2(nul, 0);
    char *fields[3];
    size_t at = 0;
    for (int i = 0; i < 3; i++) {
        if (at >= size) {
            errno = EINVAL;
            return fail_start("got an incomplete task for", dir);
        }
        fields[i] = msg + at;
        at += strlen(msg + at) + 1;
    }
    const char *task_dir = fields[0], *cwd = fields[1], *notice = fields[2];
    size_t count = 0;
    for (size_t i = at; i < size; i++) count += msg[i] == '\0';
    char **envp = calloc(count + 1, sizeof *envp);
    if (!envp) return fail_start("out of memory for the environment of", task_dir);
    for (size_t k = 0; at < size; at += strlen(msg + at) + 1)
        if (msg[at]) envp[k++] = msg + at;
    char command[PATH_MAX];
    if (snprintf(command, sizeof command, "%s/command.sh", task_dir) >= (int)sizeof command) {
        errno = ENAMETOOLONG;
        return fail_start("cannot run", task_dir);
    }
    if (chdir(cwd)) return fail_start("could not change to the working directory", cwd);
    int po[2], pe[2];
    if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) || pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC))
        return fail_start("could not make pipes for", task_dir);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_child;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, NULL);

    pid_t child = fork();
    if (child < 0) return fail_start("could not fork for", task_dir);
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
    put(out, notice, strlen(notice));
    put(all, notice, strlen(notice));

    struct pollfd fds[3] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}, {wake[0], POLLIN, 0}};

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
                put(i == 0 ? out : stderr_fd(), buf, (size_t)n);
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
    return finish(rc < 0 ? 255 : rc);
}
