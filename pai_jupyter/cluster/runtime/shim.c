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
 * Files: the shim may be root, and the task may once have been able to write DIR, so every file the shim makes
 * there is opened beneath DIR (openat), never through a link: a symlink, a hard link or a FIFO in its place is
 * refused, exit_code is made new (O_EXCL) after the name is unlinked. Its files stay the shim's (never chowned to
 * the task's account): the task writes its logs only through the shim's pipes.
 *
 * A shell in the task (the web terminal): asked with SIGUSR1, the shim of a running task listens on DIR/exec.sock
 * (a unix socket, 0600: only the shim's own account, the daemon, may connect, and the shim checks that with
 * SO_PEERCRED). Asked, not always: the socket's inode costs ~0.3 ms of file system per task, and few tasks get
 * a terminal. A client,
 *
 *     pai-shim --exec SOCKET SHIM_PID:START_TICKS CWD ARGV...
 *
 * run by the daemon under the terminal's pty, pins the shim (a pidfd of SHIM_PID, checked against its start
 * time, so no signal reaches a process that took a dead shim's pid), asks it for the socket when there is none
 * yet, checks that the socket's listener is that shim, gives up the pty as its controlling terminal and sends
 * its stdin, stdout and stderr (SCM_RIGHTS) with CWD, ARGV and the shell's environment in one SOCK_SEQPACKET
 * message. That environment reaches the client as PAI_JUPYTER_SHELL_ENV_<n>=KEY=VALUE, one variable each: the
 * client may be root, and a job's LD_PRELOAD or GLIBC_TUNABLES must act on the shell only, never on it. The shim
 * forks a child that makes the pty its controlling terminal in a new session, becomes the task's account,
 * changes to CWD (as the account, never as root) and execs ARGV: the shell is in the task's cgroups and below
 * the shim's subreaper, and ends with the task. The shim answers the shell's status (4 bytes, 128+N for signal
 * N), which the client exits with; a client that goes away hangs the shell up (SIGHUP to its session).
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
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DRAIN_SECONDS 5
static double drain_seconds = DRAIN_SECONDS; /* the job's PAI_PREEMPT_GRACE_SECONDS, when longer */
#define EXEC_SOCKET "exec.sock" /* taskdir.EXEC_SOCKET */
#define MAX_EXECS 16            /* shells open in the task at once */
#define EXEC_MSG_MAX (256 * 1024)
#define SHELL_ENV "PAI_JUPYTER_SHELL_ENV_" /* shim.SHELL_ENV_PREFIX */

static int wake[2] = {-1, -1}; /* self-pipe: SIGCHLD -> poll() */
static int out = -1, err = -1, all = -1, code = -1, task_fd = -1, rlog = -1, listener = -1;
static uid_t run_uid;
static gid_t run_gid;
static int has_cred = 0;
static struct { int conn; pid_t pid; } execs[MAX_EXECS]; /* a client's connection; its shell once started */
static volatile sig_atomic_t exec_asked = 0;              /* SIGUSR1: a client wants the socket */

/* A file of the task's, beneath DIR and never through a link (see "Files" above). O_NONBLOCK: a FIFO cannot
 * hang the open. -1 with errno set when it cannot be made or is not a plain file of one name. */
static int task_file(const char *name, int flags) {
    int fd = openat(task_fd, name, flags | O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_nlink != 1)) {
        close(fd);
        errno = EPERM;
        return -1;
    }
    return fd;
}

static void on_child(int sig) {
    int saved = errno;
    (void)sig;
    if (write(wake[1], "c", 1) < 0) { /* full pipe: a wake-up is pending anyway */ }
    errno = saved;
}

static void on_exec_ask(int sig) {
    int saved = errno;
    (void)sig;
    exec_asked = 1;
    if (write(wake[1], "x", 1) < 0) { /* no pipe yet (the loop looks anyway), or a wake-up is pending */ }
    errno = saved;
}

/* SIGTERM (a stop) and the other signals a job may be preempted with (INT, HUP, USR2; USR1 is the exec ask, which
 * never ends a shim) must reach the command, never end the shim: blocked here, unblocked just before an exec. */
static void block_term(int how) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR2);
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
        err = task_file("stderr", O_CREAT | O_APPEND);
    }
    return err;
}

/* The runtime's own words about the task (OpenPAI's "runtime" log): made when there is something to say. */
static void say(const char *text) {
    if (rlog < 0 && task_fd >= 0) {
        rlog = task_file("runtime", O_CREAT | O_APPEND);
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

/* No more shells. The socket's name stays (no file-system work on the way out): a late client is refused, and
 * the next start into this directory replaces it. */
static void close_exec(void) {
    if (listener < 0) return;
    close(listener);
    listener = -1;
}

/* The exit status into the (empty) exit_code: one small write, so a reader sees nothing or all of it. */
static int finish(int rc) {
    char text[16];
    int len = snprintf(text, sizeof text, "%d\n", rc);
    close_exec();
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

/* ---- shells in the task (see "A shell in the task" above) --------------------------------------------------- */

/* The socket, made when a client first asks for it. Bound by a name relative to DIR (a socket's path is short;
 * DIR's may not be), 0600 through the umask. Without it the task runs all the same, with no shells. */
static void listen_exec(void) {
    struct sockaddr_un addr = {.sun_family = AF_UNIX, .sun_path = EXEC_SOCKET};
    listener = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listener < 0) return;
    unlinkat(task_fd, EXEC_SOCKET, 0); /* an earlier start's (a name: never followed) */
    mode_t mask = umask(0177);
    int bad = fchdir(task_fd) || bind(listener, (struct sockaddr *)&addr, sizeof addr) || listen(listener, 8);
    umask(mask);
    if (chdir("/")) { /* the command changes to its own directory */ }
    if (bad) {
        close(listener);
        listener = -1;
    }
}

/* A client: taken when it is the shim's own account or root (the socket's mode says so too) and a slot is free. */
static void accept_exec(void) {
    int c = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) return;
    struct ucred cred;
    socklen_t len = sizeof cred;
    for (int i = 0; i < MAX_EXECS; i++) {
        if (execs[i].conn >= 0) continue;
        if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &len) || (cred.uid != 0 && cred.uid != geteuid())) break;
        execs[i].conn = c;
        execs[i].pid = 0;
        return;
    }
    close(c);
}

static void end_exec(int i) {
    close(execs[i].conn);
    execs[i].conn = -1;
    execs[i].pid = 0;
}

/* The child: the pty its controlling terminal in a session of its own, then the task's account, then CWD. */
static void exec_child(const int *tty, const char *cwd, char **args, char **envp) {
    signal(SIGCHLD, SIG_DFL);
    setsid();
    for (int i = 0; i < 3; i++) dup2(tty[i], i);
    if (ioctl(0, TIOCSCTTY, 0) && ioctl(0, TIOCSCTTY, 1)) { /* not a terminal: a shell without job control */ }
    if (has_cred && (setgroups(1, &run_gid) || setgid(run_gid) || setuid(run_uid))) {
        dprintf(2, "pai-shim: could not become %u:%u: %s\r\n", run_uid, run_gid, strerror(errno));
        _exit(127);
    }
    if (cwd[0] && chdir(cwd)) {
        dprintf(2, "pai-shim: could not change to %s: %s\r\n", cwd, strerror(errno));
        if (chdir("/")) { /* then wherever the shim is */ }
    }
    block_term(SIG_UNBLOCK);
    execve(args[0], args, envp);
    dprintf(2, "pai-shim: could not run %s: %s\r\n", args[0], strerror(errno));
    _exit(127);
}

/* A client's request, "CWD \0 ARGC \0 ARGV... \0 KEY=VALUE \0 ..." with its stdin, stdout and stderr: the shell
 * started, or (a request that is not whole) the connection closed. */
static void start_exec(int slot) {
    char *msg = malloc(EXEC_MSG_MAX);
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(3 * sizeof(int))];
    } ctl;
    struct iovec iov = {msg, EXEC_MSG_MAX - 1};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
    ssize_t n = msg ? recvmsg(execs[slot].conn, &mh, MSG_CMSG_CLOEXEC) : -1;
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        free(msg);
        return;
    }
    int tty[3] = {-1, -1, -1}, ntty = 0;
    struct cmsghdr *cm = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
    if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
        ntty = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        memcpy(tty, CMSG_DATA(cm), (size_t)(ntty < 3 ? ntty : 3) * sizeof(int));
    }
    pid_t pid = -1;
    size_t fields = 0;
    for (ssize_t i = 0; i < n; i++) fields += msg[i] == '\0';
    char **vec = ntty == 3 && !(mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) && fields >= 3 && msg[n - 1] == '\0'
                     ? calloc(fields + 1, sizeof *vec)
                     : NULL;
    if (vec) {
        char *cwd = msg, *at = cwd + strlen(cwd) + 1;
        long argc = strtol(at, NULL, 10);
        at += strlen(at) + 1;
        size_t k = 0;
        for (; at < msg + n; at += strlen(at) + 1, k++) vec[k + (k >= (size_t)argc)] = at;
        /* vec: ARGV, NULL, the environment, NULL */
        if (argc >= 1 && (size_t)argc <= k) {
            pid = fork();
            if (pid == 0) exec_child(tty, cwd, vec, vec + argc + 1);
        }
        free(vec);
    }
    for (int i = 0; i < 3; i++)
        if (tty[i] >= 0) close(tty[i]);
    free(msg);
    if (pid > 0)
        execs[slot].pid = pid;
    else
        end_exec(slot);
}

/* A shell has ended: its client gets its status. */
static void exec_ended(pid_t pid, int rc) {
    for (int i = 0; i < MAX_EXECS; i++) {
        if (execs[i].conn < 0 || execs[i].pid != pid) continue;
        int32_t status = rc;
        if (send(execs[i].conn, &status, sizeof status, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) { /* it went away */ }
        end_exec(i);
    }
}

/* A pidfd of the shim when PID still is the process that started at START (clock ticks since boot, field 22 of
 * /proc/PID/stat), else -1; -2 where the kernel has no pidfds (then kill(PID), checked the same way). */
static int pin_shim(pid_t pid, unsigned long long start) {
    int fd = (int)syscall(SYS_pidfd_open, pid, 0), none = fd < 0 && errno == ENOSYS;
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int f = fd >= 0 || none ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    ssize_t n = f >= 0 ? read(f, buf, sizeof buf - 1) : -1;
    if (f >= 0) close(f);
    char *field = n > 0 ? (buf[n] = '\0', strrchr(buf, ')')) : NULL;
    for (int i = 2; field && i < 22; i++) field = strchr(field + 1, ' '); /* from field 2's end to 22's start */
    if (field && strtoull(field + 1, NULL, 10) == start) return none ? -2 : fd;
    if (fd >= 0) close(fd);
    return -1;
}

static int signal_shim(int pin, pid_t pid, int sig) {
    return pin == -2 ? kill(pid, sig) : (int)syscall(SYS_pidfd_send_signal, pin, sig, NULL, 0);
}

/* pai-shim --exec SOCKET SHIM_PID:START_TICKS CWD ARGV...: the daemon's side (see "A shell in the task" above). */
static int exec_client(int argc, char **argv) {
    unsigned long long start;
    int shim;
    if (argc < 6 || sscanf(argv[3], "%d:%llu", &shim, &start) != 2) {
        fprintf(stderr, "usage: pai-shim --exec SOCKET SHIM_PID:START_TICKS CWD ARGV... (run by pai_jupyter)\n");
        return 2;
    }
    const char *path = argv[2], *cwd = argv[4], *slash = strrchr(path, '/');
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    const char *name = slash ? slash + 1 : path;
    if (strlen(name) >= sizeof addr.sun_path) return 2;
    strcpy(addr.sun_path, name);
    char *dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : NULL;
    int pin = pin_shim(shim, start);
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), bad = pin == -1 || s < 0 || (dir && chdir(dir));
    /* no socket yet (or an earlier start's): ask the shim for one, then wait for it while the shim lives */
    for (int tries = 0; !bad && connect(s, (struct sockaddr *)&addr, sizeof addr); tries++) {
        bad = (errno != ENOENT && errno != ECONNREFUSED) || tries == 2000;
        if (!bad) bad = signal_shim(pin, shim, tries ? 0 : SIGUSR1) != 0; /* asked once; then: is it alive? */
        if (!bad) usleep(1000);
    }
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (bad) {
        fprintf(stderr, "pai-shim: no shell in this task (%s: %s): it has ended, or its shim is older\r\n", path,
                strerror(errno));
        return 255;
    }
    if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &len) || cred.pid != shim) {
        fprintf(stderr, "pai-shim: %s is not served by the task's shim (pid %d): refused\r\n", path, shim);
        return 255;
    }
    extern char **environ;
    size_t size = strlen(cwd) + 16, skip = strlen(SHELL_ENV);
    for (int i = 5; i < argc; i++) size += strlen(argv[i]) + 1;
    for (char **e = environ; *e; e++) size += strlen(*e) + 1;
    char *msg = malloc(size), *at = msg;
    if (!msg || size >= EXEC_MSG_MAX) {
        fprintf(stderr, "pai-shim: the shell's environment is too large (%zu bytes)\r\n", size);
        return 255;
    }
    at += sprintf(at, "%s", cwd) + 1;
    at += sprintf(at, "%d", argc - 5) + 1;
    for (int i = 5; i < argc; i++) at = stpcpy(at, argv[i]) + 1;
    for (char **e = environ; *e; e++)
        if (strncmp(*e, SHELL_ENV, skip) == 0 && strchr(*e, '=')) at = stpcpy(at, strchr(*e, '=') + 1) + 1;
    /* the pty is this process's controlling terminal (it leads the pty's session): let it go, so the shell's
     * session can take it; that hangs up this process's own group (itself), hence SIGHUP ignored meanwhile */
    signal(SIGHUP, SIG_IGN);
    if (ioctl(0, TIOCNOTTY)) { /* not our controlling terminal: nothing to give up */ }
    signal(SIGHUP, SIG_DFL);
    int tty[3] = {0, 1, 2};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof tty)];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = {msg, (size_t)(at - msg)};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof tty);
    memcpy(CMSG_DATA(cm), tty, sizeof tty);
    int32_t status;
    ssize_t r = sendmsg(s, &mh, MSG_NOSIGNAL);
    if (r < 0 && errno == EMSGSIZE) {
        fprintf(stderr, "pai-shim: the shell's environment is too large (%zu bytes)\r\n", size);
        return 255;
    }
    while (r >= 0 && (r = recv(s, &status, sizeof status, 0)) < 0 && errno == EINTR) r = 0;
    if (r == (ssize_t)sizeof status) return status & 255;
    fprintf(stderr, "\r\n[pai_jupyter] the shell is over: its task has ended (or its shim refused this caller)\r\n");
    return 255;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--exec") == 0) return exec_client(argc, argv);
    block_term(SIG_BLOCK);
    struct sigaction ask;
    memset(&ask, 0, sizeof ask);
    ask.sa_handler = on_exec_ask;
    ask.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &ask, NULL); /* first: a client's SIGUSR1 must never end a shim */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    if (argc != 2) {
        fprintf(stderr, "usage: pai-shim DIR < TASK (started by pai_jupyter's process runtime; see shim.c)\n");
        return 2;
    }
    const char *dir = argv[1];
    for (int i = 0; i < MAX_EXECS; i++) execs[i].conn = -1;
    task_fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC); /* follows the directory if it is renamed */
    out = task_file("stdout", O_CREAT | O_APPEND);
    all = task_file("all", O_CREAT | O_APPEND);
    unlinkat(task_fd, "exit_code", 0); /* an earlier start's: made new below, never truncated through a link */
    code = task_file("exit_code", O_CREAT | O_EXCL);
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
    }
    size_t count = 0;
    for (size_t i = at; i < size; i++) count += msg[i] == '\0';
    char **envp = calloc(count + 1, sizeof *envp);
    if (!envp) return fail_start("out of memory for the environment of", task_dir);
    for (size_t k = 0; at < size; at += strlen(msg + at) + 1)
        if (msg[at]) envp[k++] = msg + at;
    for (char **e = envp; *e; e++) /* a command ended by a signal drains as long as a preempted task may save */
        if (strncmp(*e, "PAI_PREEMPT_GRACE_SECONDS=", 26) == 0 && atof(*e + 26) > drain_seconds)
            drain_seconds = atof(*e + 26);
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
        if (chdir(cwd)) { /* as the task's account: root never follows a path the task could have made */
            dprintf(2, "pai-shim: could not change to the working directory %s: %s\n", cwd, strerror(errno));
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

    /* the command's stdout and stderr, SIGCHLD, the shell socket and its clients */
    struct pollfd fds[4 + MAX_EXECS] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}, {wake[0], POLLIN, 0}};

    int rc = -1;
    double deadline = 0;
    char buf[65536];
    while (rc < 0 || fds[0].fd >= 0 || fds[1].fd >= 0) {
        if (exec_asked && rc < 0) {
            exec_asked = 0;
            if (listener < 0) listen_exec();
        }
        int timeout = -1;
        if (rc >= 0) {
            double left = deadline - now();
            if (left <= 0) break; /* something that ignored SIGTERM still holds a pipe: stop waiting for it */
            timeout = (int)(left * 1000) + 1;
        }
        fds[3].fd = listener;
        fds[3].events = POLLIN;
        for (int i = 0; i < MAX_EXECS; i++) {
            fds[4 + i].fd = execs[i].conn;
            fds[4 + i].events = POLLIN;
        }
        if (poll(fds, 4 + MAX_EXECS, timeout) < 0) {
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
        for (int i = 0; i < MAX_EXECS; i++) {
            if (execs[i].conn < 0 || execs[i].conn != fds[4 + i].fd || !fds[4 + i].revents) continue;
            if (execs[i].pid == 0) {
                start_exec(i);
            } else {
                ssize_t r = recv(execs[i].conn, buf, 1, MSG_DONTWAIT);
                if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
                    kill(-execs[i].pid, SIGHUP); /* its client went away (the terminal was closed): hang up */
                    end_exec(i);
                }
            }
        }
        if (listener >= 0 && fds[3].revents & POLLIN) accept_exec();
        int status;
        pid_t p;
        while ((p = waitpid(-1, &status, WNOHANG)) > 0) { /* the command, its shells, and orphans we adopted */
            int ended = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
            if (p != child) {
                exec_ended(p, ended);
                continue;
            }
            if (rc >= 0) continue;
            rc = ended;
            close_exec(); /* no new shells in a task that is over */
            kill(0, SIGTERM); /* background children of the command: the task is over */
            kill_descendants(SIGTERM);
            /* ended by a signal (a stop, a preemption): what it started may still be saving, as long as its grace
             * (the runtime's SIGKILL after the grace bounds it); else the usual drain */
            deadline = now() + (ended > 128 ? drain_seconds : DRAIN_SECONDS);
        }
    }
    kill_descendants(SIGKILL); /* nothing the task started outlives it, in its group or not */
    return finish(rc < 0 ? 255 : rc);
}
