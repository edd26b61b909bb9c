/* pai_jupyter task shim for the process runtime: pai-shim DIR
 *
 * Started by the runtime in a new session (so it leads the task's process group) and put into the task's
 * cgroups, the shim first makes its files in DIR: stdout, all and an empty exit_code (stderr and runtime only
 * when something is written to them), and writes one byte to its stdout to say it is ready. Then it waits for
 * its task on stdin:
 *
 *     TASK_DIR \0 WORK_DIR \0 NOTICE \0 SCRIPT \0 CRED \0 KEY=VALUE \0 KEY=VALUE \0 ...      then end-of-file
 *
 * TASK_DIR is DIR itself, or DIR renamed by the runtime meanwhile (the shim's files stay open across a rename).
 * SCRIPT is the task's commands. They run the way OpenPAI's runtime runs them: one bash script under
 * ``set -o errexit -o nounset -o pipefail``; without /bin/bash, /bin/sh with the same options it supports, said
 * in the task's ``runtime`` log. The script goes to the shell through an in-memory file (memfd), never through
 * the disk: it holds the job's secrets. CRED is empty, or "UID:GID" to run the command as that account (a
 * daemon running as root runs each user's tasks as that user's own account). The command runs in WORK_DIR with
 * exactly the given environment; NOTICE (the runtime's own words, e.g. "the image was not used") goes into the
 * task's ``runtime`` log, the command's stdout and stderr into stdout and stderr and both, in the order they
 * arrive, into all, and once the logs are complete the command's status (128+N for signal N) goes into
 * exit_code (empty until then) and the shim exits with it. End-of-file with nothing written means the daemon
 * went away before it had a task for this shim: it exits 0.
 *
 * The same files as shim.sh (the fallback without a C compiler, and the Docker runtime's shim), so recovery
 * and the logs do not care which one ran a task. Why C: shim.sh costs two shells, a subshell and two tees per
 * task; this is one exec and a fork. Why the wait: the runtime starts shims ahead of their tasks ("warm", see
 * warm.py) in a ready task directory, because creating files and directories costs up to a millisecond each
 * on some disks, and on cgroup v1 moving a process into a cgroup waits for an RCU grace period (5-40 ms
 * measured); the environment and the script (secrets included) never touch the disk. Like conmon or
 * containerd-shim, the shim outlives the daemon, so a task keeps running and logging while the daemon restarts.
 *
 * Escapes: the shim is a child subreaper (PR_SET_CHILD_SUBREAPER), so a process that leaves the task's process
 * group and session (``setsid``, a double fork) is still the shim's descendant: the runtime's watchdog counts
 * its memory and a stop reaches it, and the shim ends every descendant when the task is over.
 *
 * Stop: SIGTERM to the group must reach the command, never the shim. The shim blocks it from its first
 * instruction and the command unblocks it just before its exec, so one that comes in between stays pending and
 * still ends the command. When the command is done the group and every other descendant get SIGTERM so that no
 * background child outlives it; the shim then drains the pipes until they close or DRAIN_SECONDS pass (a child
 * that ignores SIGTERM cannot hold the task open), and SIGKILLs what is left before it exits. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DRAIN_SECONDS 5

static int wake[2] = {-1, -1}; /* self-pipe: SIGCHLD -> poll() */
static int out = -1, err = -1, all = -1, code = -1, task_fd = -1, rlog = -1;
static uid_t run_uid;
static gid_t run_gid;
static int has_cred = 0;

/* A file of the task's belongs to the account that runs it (the shim may be root, the command not). */
static void own(int fd) {
    if (fd >= 0 && has_cred && fchown(fd, run_uid, run_gid)) { /* the daemon reads it as root anyway */ }
}

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
    if (err < 0 && task_fd >= 0) {
        err = openat(task_fd, "stderr", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        own(err);
    }
    return err;
}

/* The runtime's own words about the task (OpenPAI's "runtime" log): made when there is something to say. */
static void say(const char *text) {
    if (rlog < 0 && task_fd >= 0) {
        rlog = openat(task_fd, "runtime", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        own(rlog);
    }
    put(rlog, text, strlen(text));
}

/* Signal every descendant of the shim but the shim itself: as a subreaper, whatever left the process group
 * (setsid, a double fork) is still below it. One read of /proc, then members are found parent by parent. */
static void kill_descendants(int sig) {
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 && errno == ECHILD) return; /* no child: no scan */
    DIR *proc = opendir("/proc");
    if (!proc) return;
    size_t n = 0, cap = 1024;
    pid_t *pid = malloc(cap * sizeof *pid), *ppid = malloc(cap * sizeof *ppid);
    struct dirent *e;
    while (pid && ppid && (e = readdir(proc)) != NULL) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t len = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (len <= 0) continue;
        buf[len] = '\0';
        char *close_paren = strrchr(buf, ')');
        int parent;
        if (!close_paren || sscanf(close_paren + 2, "%*c %d", &parent) != 1) continue;
        if (n == cap) {
            cap *= 2;
            pid_t *p2 = realloc(pid, cap * sizeof *pid), *q2 = p2 ? realloc(ppid, cap * sizeof *ppid) : NULL;
            if (p2) pid = p2;
            if (!p2 || !q2) break;
            ppid = q2;
        }
        pid[n] = (pid_t)atoi(e->d_name);
        ppid[n++] = (pid_t)parent;
    }
    closedir(proc);
    char *in = pid && ppid ? calloc(n + 1, 1) : NULL;
    pid_t self = getpid();
    for (int changed = in != NULL; changed;) {
        changed = 0;
        for (size_t i = 0; i < n; i++) {
            if (in[i]) continue;
            int member = ppid[i] == self;
            for (size_t j = 0; !member && j < n; j++) member = in[j] && pid[j] == ppid[i];
            if (member) in[i] = changed = 1;
        }
    }
    for (size_t i = 0; in && i < n; i++)
        if (in[i]) kill(pid[i], sig);
    free(in);
    free(pid);
    free(ppid);
}

/* Can /bin/sh take ``-o pipefail`` (busybox ash: yes; dash: no)? Asked only where there is no bash. */
static int sh_has_pipefail(void) {
    pid_t p = fork();
    if (p == 0) {
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0) { dup2(nul, 1); dup2(nul, 2); }
        execl("/bin/sh", "sh", "-o", "pipefail", "-c", ":", (char *)NULL);
        _exit(127);
    }
    int status;
    return p > 0 && waitpid(p, &status, 0) == p && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static int open_in(const char *dir, const char *name, int flags) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) return -1;
    return open(path, flags | O_CLOEXEC, 0600);
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
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    if (argc != 2) {
        fprintf(stderr, "usage: pai-shim DIR < TASK (started by pai_jupyter's process runtime; see shim.c)\n");
        return 2;
    }
    const char *dir = argv[1];
    task_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC); /* follows the directory if it is renamed */
    out = open_in(dir, "stdout", O_WRONLY | O_CREAT | O_APPEND);
    all = open_in(dir, "all", O_WRONLY | O_CREAT | O_APPEND);
    code = open_in(dir, "exit_code", O_WRONLY | O_CREAT | O_TRUNC);
    if (task_fd < 0 || out < 0 || all < 0 || code < 0) {
        perror("pai-shim: cannot make the task's files");
        return 2;
    }
    /* the room for the exit status, taken now: a task that ends on a full disk still records how it ended */
    if (fallocate(code, FALLOC_FL_KEEP_SIZE, 0, 64)) { /* not every file system can: then it is a plain write */ }
    put(1, "\n", 1); /* ready: the files are made, the directory may be renamed */
    int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (nul >= 0) dup2(nul, 1);

    size_t size = 0;
    char *msg = read_stdin(&size);
    if (!msg) return fail_start("could not read its task from", "stdin");
    if (size == 0) return 0; /* no task came */
    if (nul >= 0) dup2(nul, 0);
    char *fields[5];
    size_t at = 0;
    for (int i = 0; i < 5; i++) {
        if (at >= size) {
            errno = EINVAL;
            return fail_start("got an incomplete task for", dir);
        }
        fields[i] = msg + at;
        at += strlen(msg + at) + 1;
    }
    const char *task_dir = fields[0], *cwd = fields[1], *notice = fields[2], *script = fields[3];
    unsigned cu, cg;
    if (fields[4][0] && sscanf(fields[4], "%u:%u", &cu, &cg) == 2) {
        run_uid = (uid_t)cu;
        run_gid = (gid_t)cg;
        has_cred = 1;
        own(out);
        own(all);
        own(code);
    }
    size_t count = 0;
    for (size_t i = at; i < size; i++) count += msg[i] == '\0';
    char **envp = calloc(count + 1, sizeof *envp);
    if (!envp) return fail_start("out of memory for the environment of", task_dir);
    for (size_t k = 0; at < size; at += strlen(msg + at) + 1)
        if (msg[at]) envp[k++] = msg + at;
    int mfd = memfd_create("pai-command", MFD_CLOEXEC);
    if (mfd < 0) return fail_start("could not make an in-memory file for the script of", task_dir);
    put(mfd, script, strlen(script));
    put(mfd, "\n", 1);
    lseek(mfd, 0, SEEK_SET);
    const char *shell = "/bin/bash";
    int pipefail = 1;
    if (access(shell, X_OK) && access("/usr/bin/bash", X_OK) == 0) shell = "/usr/bin/bash";
    if (access(shell, X_OK)) {
        shell = "/bin/sh";
        pipefail = sh_has_pipefail();
        say(pipefail ? "[pai_jupyter] no bash here: the commands run under /bin/sh with errexit, nounset and "
                       "pipefail (OpenPAI runs them under bash)\n"
                     : "[pai_jupyter] no bash here: the commands run under /bin/sh with errexit and nounset "
                       "(this sh has no pipefail; OpenPAI runs them under bash)\n");
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
        int sfd = dup(mfd); /* without close-on-exec: the shell reads its script from it */
        char command[32];
        snprintf(command, sizeof command, "/dev/fd/%d", sfd);
        if (has_cred && (setgroups(1, &run_gid) || setgid(run_gid) || setuid(run_uid))) {
            dprintf(2, "pai-shim: could not become %u:%u: %s\n", run_uid, run_gid, strerror(errno));
            _exit(127);
        }
        block_term(SIG_UNBLOCK);
        char *name = strrchr(shell, '/') + 1;
        char *args[] = {name, "-o", "errexit", "-o", "nounset", "-o", "pipefail", command, NULL};
        if (!pipefail) {
            args[5] = command;
            args[6] = NULL;
        }
        execve(shell, args, envp);
        dprintf(2, "pai-shim: could not run %s: %s\n", shell, strerror(errno));
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    close(mfd);
    if (notice[0]) say(notice);

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
        pid_t p;
        while ((p = waitpid(-1, &status, WNOHANG)) > 0) { /* the command, and orphans we adopted */
            if (p != child || rc >= 0) continue;
            rc = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
            kill(0, SIGTERM); /* background children of the command: the task is over */
            kill_descendants(SIGTERM);
            deadline = now() + DRAIN_SECONDS;
        }
    }
    kill_descendants(SIGKILL); /* nothing the task started outlives it, in its group or not */
    return finish(rc < 0 ? 255 : rc);
}
