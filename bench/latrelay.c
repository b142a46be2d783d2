/* latrelay: a TCP relay on loopback that delays what clients send by a fixed
 * time and relays the answers at kernel speed: first-byte latency for the
 * object store benchmarks (bench/s3_load, bench/obj_load) without a relay
 * that is itself the limit. tests/s3/faultproxy.py, a Python proxy under
 * one interpreter lock, capped every tool at its own pace (issue 38), and
 * this kernel has no sch_netem for a delay below the sockets.
 *
 *   latrelay UPSTREAM [--latency MS] [--port N] [--log FILE] [--stats FILE]
 *
 * UPSTREAM is http://HOST:PORT or HOST:PORT (s3rver, Azurite, any HTTP/1.1
 * server). Listens on 127.0.0.1 (port N, default a free one; backlog 1024),
 * prints "port N" as its first line of stdout, and connects each accepted
 * connection to UPSTREAM. Every byte a client sends is held until its
 * arrival + MS milliseconds, then sent on, in order: with HTTP/1.1
 * keep-alive each request reaches the server MS later, one round trip of
 * first-byte latency per request; the bytes are not parsed or changed
 * (signatures stay valid). The answers go back through a pipe by splice(2).
 *
 * --log FILE: one line per event, times in ms since the relay started:
 *   open C T                              connection C accepted
 *   req C N T_ARRIVED T_SENT "LINE" RANGE request N of C: its first bytes
 *                                         arrived, were sent upstream; its
 *                                         first line and Range (or -)
 *   resp C N T_FIRST T_LAST BYTES         the answer to it: first and last
 *                                         byte from upstream, bytes
 *   close C T UP_BYTES DOWN_BYTES
 * A request is the first bytes a client sends after the answer to its last
 * one began (clients here do not pipeline); the log is written at exit.
 * --stats FILE: {"connections", "requests", "up_bytes", "down_bytes",
 * "latency_ms", "min_delay_ms"} written at exit, min_delay_ms the least
 * time any request was held (the relay's own clock).
 * SIGTERM or SIGINT: stops accepting, ends the connections, writes the log
 * and stats, exits 0. A bench tool: it talks on stderr itself. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (64 << 10)
/* Bytes a connection may hold back before it stops reading its client: a
 * client that sends faster than the delay drains is slowed by TCP, not by
 * this process's memory. */
#define HELD_MAX (16 << 20)
#define PIPE_BYTES (1 << 20)

struct chunk {
    struct chunk *next;
    uint64_t due_ns, arrived_ns;
    size_t len, off;
    int starts_req;
    char buf[];
};

struct conn {
    struct conn *prev, *next; /* the live list, for SIGTERM */
    unsigned id;
    int cfd, ufd;
    atomic_uint req_sent;    /* requests sent upstream so far */
    atomic_int answered;     /* answer bytes seen since the last request */
    uint64_t up_bytes, down_bytes;
};

static struct sockaddr_storage up_addr;
static socklen_t up_len;
static uint64_t delay_ns, t0_ns;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gone = PTHREAD_COND_INITIALIZER;
static struct conn *live;
static unsigned nlive, nconns;
static uint64_t nreqs, up_total, down_total, min_delay_ns = UINT64_MAX;
/* The log in memory until exit: writing it as we go would put the file
 * system on the request path. */
static char *logbuf;
static size_t loglen, logcap;

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static double ms(uint64_t t) { return (double)(t - t0_ns) / 1e6; }

__attribute__((format(printf, 1, 2))) static void logf_(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line)
        n = sizeof line - 1;
    pthread_mutex_lock(&lock);
    if (loglen + (size_t)n + 1 > logcap) {
        size_t cap = logcap ? logcap * 2 : 1 << 20;
        char *p = realloc(logbuf, cap);
        if (!p) { /* a log cut short beats a relay that stops relaying */
            pthread_mutex_unlock(&lock);
            return;
        }
        logbuf = p, logcap = cap;
    }
    memcpy(logbuf + loglen, line, (size_t)n);
    loglen += (size_t)n;
    pthread_mutex_unlock(&lock);
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

/* "GET /b/k HTTP/1.1" and the Range value of a request's first bytes, for
 * the log; the bytes sent are never touched. */
static void describe(const struct chunk *c, char *line, size_t nline, char *range, size_t nrange)
{
    size_t i = 0;
    while (i < c->len && i + 1 < nline && c->buf[i] != '\r' && c->buf[i] != '\n') {
        char ch = c->buf[i];
        line[i++] = (ch >= 0x20 && ch < 0x7f && ch != '"') ? ch : '?';
    }
    line[i] = 0;
    snprintf(range, nrange, "-");
    for (size_t j = 0; j + 8 < c->len; j++) {
        if (c->buf[j] != '\n' || (strncasecmp(c->buf + j + 1, "range:", 6) &&
                                  strncasecmp(c->buf + j + 1, "x-ms-range:", 11)))
            continue;
        const char *v = (const char *)memchr(c->buf + j + 1, ':', c->len - j - 1) + 1;
        size_t k = 0;
        while (v < c->buf + c->len && *v == ' ')
            v++;
        while (v < c->buf + c->len && *v != '\r' && *v != '\n' && k + 1 < nrange)
            range[k++] = (*v > 0x20 && *v < 0x7f) ? *v : '?', v++;
        range[k] = 0;
        break;
    }
}

/* Client to upstream: each read stamped on arrival and sent when its time
 * comes, so a request that arrives while earlier bytes wait is held for the
 * delay from its own arrival, not from when they leave. */
static void *upward(void *arg)
{
    struct conn *c = arg;
    struct chunk *head = NULL, *tail = NULL;
    size_t held = 0;
    int eof = 0, broken = 0;
    for (;;) {
        if (head) {
            uint64_t t = now_ns();
            if (head->due_ns <= t) {
                struct chunk *h = head;
                if (h->starts_req) {
                    char line[160], range[80];
                    describe(h, line, sizeof line, range, sizeof range);
                    unsigned n = atomic_load(&c->req_sent) + 1;
                    logf_("req %u %u %.3f %.3f \"%s\" %s\n", c->id, n, ms(h->arrived_ns), ms(t),
                          line, range);
                    pthread_mutex_lock(&lock);
                    nreqs++;
                    if (t - h->arrived_ns < min_delay_ns)
                        min_delay_ns = t - h->arrived_ns;
                    pthread_mutex_unlock(&lock);
                    atomic_store(&c->req_sent, n);
                }
                if (send_all(c->ufd, h->buf + h->off, h->len - h->off)) {
                    broken = 1;
                    break;
                }
                c->up_bytes += h->len;
                held -= h->len;
                head = h->next;
                if (!head)
                    tail = NULL;
                free(h);
                continue;
            }
        }
        if (eof && !head)
            break;
        struct timespec ts, *tp = NULL;
        if (head) {
            uint64_t wait = head->due_ns - now_ns();
            if ((int64_t)wait < 0)
                wait = 0;
            ts.tv_sec = (time_t)(wait / 1000000000u);
            ts.tv_nsec = (long)(wait % 1000000000u);
            tp = &ts;
        }
        struct pollfd p = {.fd = c->cfd, .events = (eof || held >= HELD_MAX) ? 0 : POLLIN};
        int r = ppoll(&p, 1, tp, NULL);
        if (r < 0 && errno != EINTR) {
            broken = 1;
            break;
        }
        if (r <= 0 || !p.revents)
            continue;
        struct chunk *h = malloc(sizeof *h + CHUNK);
        if (!h) {
            broken = 1;
            break;
        }
        ssize_t n = read(c->cfd, h->buf, CHUNK);
        if (n <= 0) {
            free(h);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                broken = 1;
            eof = 1;
            if (broken)
                break;
            continue;
        }
        h->arrived_ns = now_ns();
        h->due_ns = h->arrived_ns + delay_ns;
        h->len = (size_t)n, h->off = 0, h->next = NULL;
        /* A new request: the first bytes of the connection, or the first
         * after its last answer began. */
        h->starts_req = atomic_exchange(&c->answered, 0) || (c->up_bytes == 0 && held == 0 &&
                                                             atomic_load(&c->req_sent) == 0);
        held += (size_t)n;
        if (tail)
            tail->next = h;
        else
            head = h;
        tail = h;
    }
    while (head) {
        struct chunk *h = head;
        head = h->next;
        free(h);
    }
    if (broken) { /* end the answers too: the client or the server is gone */
        shutdown(c->ufd, SHUT_RDWR);
        shutdown(c->cfd, SHUT_RDWR);
    } else {
        shutdown(c->ufd, SHUT_WR);
    }
    return NULL;
}

static void answer_end(struct conn *c, unsigned req, uint64_t first, uint64_t last, uint64_t bytes)
{
    if (req)
        logf_("resp %u %u %.3f %.3f %llu\n", c->id, req, ms(first), ms(last),
              (unsigned long long)bytes);
}

/* Upstream to client through a pipe (splice: no copy through this
 * process), the answers' times noted per request for the log. */
static void downward(struct conn *c)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC)) {
        fprintf(stderr, "latrelay: connection %u: pipe: %s\n", c->id, strerror(errno));
        shutdown(c->cfd, SHUT_RDWR);
        shutdown(c->ufd, SHUT_RDWR);
        return;
    }
    fcntl(pfd[1], F_SETPIPE_SZ, PIPE_BYTES); /* best effort: 64 KiB works too */
    unsigned req = 0;
    uint64_t first = 0, last = 0, bytes = 0;
    for (;;) {
        ssize_t n = splice(c->ufd, NULL, pfd[1], NULL, PIPE_BYTES, SPLICE_F_MOVE);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            shutdown(c->cfd, n == 0 ? SHUT_WR : SHUT_RDWR);
            if (n < 0)
                shutdown(c->ufd, SHUT_RDWR);
            break;
        }
        uint64_t t = now_ns();
        unsigned r = atomic_load(&c->req_sent);
        if (r != req) {
            answer_end(c, req, first, last, bytes);
            req = r, first = t, bytes = 0;
        }
        atomic_store(&c->answered, 1);
        while (n > 0) {
            ssize_t m = splice(pfd[0], NULL, c->cfd, NULL, (size_t)n, SPLICE_F_MOVE);
            if (m < 0 && errno == EINTR)
                continue;
            if (m <= 0) {
                shutdown(c->cfd, SHUT_RDWR);
                shutdown(c->ufd, SHUT_RDWR);
                goto out;
            }
            n -= m, bytes += (uint64_t)m, c->down_bytes += (uint64_t)m;
        }
        last = now_ns();
    }
out:
    answer_end(c, req, first, last, bytes);
    close(pfd[0]);
    close(pfd[1]);
}

static void *serve(void *arg)
{
    struct conn *c = arg;
    int one = 1;
    setsockopt(c->cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->ufd = socket(up_addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->ufd < 0 || connect(c->ufd, (struct sockaddr *)&up_addr, up_len)) {
        fprintf(stderr, "latrelay: connection %u: upstream connect: %s\n", c->id, strerror(errno));
        if (c->ufd >= 0)
            close(c->ufd);
        c->ufd = -1;
        shutdown(c->cfd, SHUT_RDWR);
    } else {
        setsockopt(c->ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_t t;
        int e = pthread_create(&t, NULL, upward, c);
        if (e) {
            fprintf(stderr, "latrelay: connection %u: thread: %s\n", c->id, strerror(e));
        } else {
            downward(c);
            pthread_join(t, NULL);
        }
    }
    logf_("close %u %.3f %llu %llu\n", c->id, ms(now_ns()), (unsigned long long)c->up_bytes,
          (unsigned long long)c->down_bytes);
    pthread_mutex_lock(&lock);
    /* closed under the lock, so that SIGTERM's shutdowns never reach a
     * descriptor number already reused */
    close(c->cfd);
    if (c->ufd >= 0)
        close(c->ufd);
    up_total += c->up_bytes, down_total += c->down_bytes;
    if (c->prev)
        c->prev->next = c->next;
    else
        live = c->next;
    if (c->next)
        c->next->prev = c->prev;
    if (--nlive == 0)
        pthread_cond_broadcast(&gone);
    pthread_mutex_unlock(&lock);
    free(c);
    return NULL;
}

static int upstream(const char *arg)
{
    const char *s = strncmp(arg, "http://", 7) ? arg : arg + 7;
    char host[256];
    const char *colon = strrchr(s, ':');
    size_t hl = colon ? (size_t)(colon - s) : 0;
    if (!colon || hl == 0 || hl >= sizeof host) {
        fprintf(stderr, "latrelay: upstream '%s': want http://HOST:PORT or HOST:PORT\n", arg);
        return -1;
    }
    memcpy(host, s, hl);
    host[hl] = 0;
    char port[16];
    size_t pl = strcspn(colon + 1, "/");
    if (pl == 0 || pl >= sizeof port) {
        fprintf(stderr, "latrelay: upstream '%s': no port\n", arg);
        return -1;
    }
    memcpy(port, colon + 1, pl);
    port[pl] = 0;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
    int e = getaddrinfo(host, port, &hints, &ai);
    if (e) {
        fprintf(stderr, "latrelay: upstream '%s': %s\n", arg, gai_strerror(e));
        return -1;
    }
    memcpy(&up_addr, ai->ai_addr, ai->ai_addrlen);
    up_len = ai->ai_addrlen;
    freeaddrinfo(ai);
    return 0;
}

static int write_file(const char *path, const char *data, size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f)) {
        fprintf(stderr, "latrelay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static long number(const char *opt, const char *v, long max)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || end == v || n < 0 || n > max) {
        fprintf(stderr, "latrelay: %s: a whole number 0 to %ld, not '%s'\n", opt, max, v);
        return -1;
    }
    return n;
}

int main(int argc, char **argv)
{
    const char *up = NULL, *logpath = NULL, *statspath = NULL;
    long lat = 0, port = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: latrelay UPSTREAM [--latency MS] [--port N] [--log FILE] "
                   "[--stats FILE]\n"
                   "  relays 127.0.0.1:N to UPSTREAM (http://HOST:PORT), each client's bytes\n"
                   "  held MS ms after their arrival, the answers spliced back at once;\n"
                   "  prints \"port N\" first (bench/latrelay.c has the log format)\n");
            return 0;
        }
        if (a[0] != '-' && !up) {
            up = a;
            continue;
        }
        if (!v || (strcmp(a, "--latency") && strcmp(a, "--port") && strcmp(a, "--log") &&
                   strcmp(a, "--stats"))) {
            fprintf(stderr, "latrelay: bad argument '%s' (--help)\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--latency") && (lat = number(a, v, 600000)) < 0)
            return 2;
        if (!strcmp(a, "--port") && (port = number(a, v, 65535)) < 0)
            return 2;
        if (!strcmp(a, "--log"))
            logpath = v;
        if (!strcmp(a, "--stats"))
            statspath = v;
    }
    if (!up) {
        fprintf(stderr, "latrelay: no UPSTREAM (--help)\n");
        return 2;
    }
    if (upstream(up))
        return 2;
    delay_ns = (uint64_t)lat * 1000000u;
    t0_ns = now_ns();

    /* Blocked before any thread exists, so every thread inherits the mask
     * and only the signalfd below sees them. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sfd = signalfd(-1, &stop, SFD_CLOEXEC);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (sfd < 0 || lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        bind(lfd, (struct sockaddr *)&sa, sizeof sa) ||
        /* pinio opens 16 connections at once: a short queue drops SYNs,
         * which come back a second later (issue 38's backlog of 5) */
        listen(lfd, 1024) || getsockname(lfd, (struct sockaddr *)&sa, &sl)) {
        fprintf(stderr, "latrelay: listen on 127.0.0.1:%ld: %s\n", port, strerror(errno));
        return 1;
    }
    printf("port %u\n", ntohs(sa.sin_port));
    fflush(stdout);

    for (;;) {
        struct pollfd p[2] = {{.fd = lfd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "latrelay: poll: %s\n", strerror(errno));
            break;
        }
        if (p[1].revents)
            break;
        if (!p[0].revents)
            continue;
        int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (cfd < 0) {
            if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN)
                fprintf(stderr, "latrelay: accept: %s\n", strerror(errno));
            if (errno == EMFILE || errno == ENFILE)
                usleep(10000); /* let a connection end before trying again */
            continue;
        }
        struct conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(cfd);
            continue;
        }
        c->cfd = cfd, c->ufd = -1;
        pthread_mutex_lock(&lock);
        c->id = ++nconns;
        c->next = live;
        if (live)
            live->prev = c;
        live = c;
        nlive++;
        pthread_mutex_unlock(&lock);
        logf_("open %u %.3f\n", c->id, ms(now_ns()));
        pthread_attr_t at;
        pthread_t t;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        int e = pthread_create(&t, &at, serve, c);
        pthread_attr_destroy(&at);
        if (e) {
            fprintf(stderr, "latrelay: connection %u: thread: %s\n", c->id, strerror(e));
            pthread_mutex_lock(&lock);
            live = c->next;
            if (live)
                live->prev = NULL;
            nlive--;
            pthread_mutex_unlock(&lock);
            close(cfd);
            free(c);
        }
    }
    close(lfd);
    /* Stop: every connection ended from outside, its thread then closes it. */
    pthread_mutex_lock(&lock);
    for (struct conn *c = live; c; c = c->next) {
        shutdown(c->cfd, SHUT_RDWR);
        if (c->ufd >= 0)
            shutdown(c->ufd, SHUT_RDWR);
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    while (nlive && pthread_cond_timedwait(&gone, &lock, &until) != ETIMEDOUT) {
    }
    unsigned left = nlive;
    char stats[256];
    int sn = snprintf(stats, sizeof stats,
                      "{\"connections\": %u, \"requests\": %llu, \"up_bytes\": %llu, "
                      "\"down_bytes\": %llu, \"latency_ms\": %ld, \"min_delay_ms\": %.3f}\n",
                      nconns, (unsigned long long)nreqs, (unsigned long long)up_total,
                      (unsigned long long)down_total, lat,
                      nreqs ? (double)min_delay_ns / 1e6 : 0.0);
    int rc = 0;
    if (logpath && write_file(logpath, logbuf ? logbuf : "", loglen))
        rc = 1;
    if (statspath && write_file(statspath, stats, (size_t)sn))
        rc = 1;
    pthread_mutex_unlock(&lock);
    if (left) {
        fprintf(stderr, "latrelay: %u connection(s) still open after 10 s\n", left);
        rc = 1;
    }
    return rc;
}
