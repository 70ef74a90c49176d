/* SPDX-License-Identifier: MIT */
/*
 * Local users against ved and its clients (issue: hijack of the default
 * socket folder, idle connections locking everyone out, refusals lost to
 * ECONNRESET, two veds on one device, a 0700 socket documented as 0600).
 * The tests that need a second user run as root (CI does) and use uid/gid
 * 65534; elsewhere they skip.
 *   ved_socket_mode       the socket is 0600, its folder 0700
 *   ved_one_per_device    a second ved for the device, on another socket,
 *                         refuses and names the first (pid and socket)
 *   ved_dir_hijack        another user made the default folder first and
 *                         serves a socket there: the client refuses it,
 *                         runs embedded with a warning at once (no hang),
 *                         VE_STRICT=1 stops it; ve-ctl refuses too
 *   ved_server_uid        a server of another uid in a folder of ours
 *   ved_open_folder       a folder others can write: refused
 *   ved_refusal_readable  a refusal right at accept is read as text, not
 *                         as ECONNRESET
 *   ved_garbage           malformed, truncated, oversized control messages,
 *                         stray fds: refused, ved stays up and serves
 *   ved_idle_flood        a user of ved's group opens 170 idle connections:
 *                         capped per uid, each refusal readable, the owner
 *                         still gets through, the idle ones close at the
 *                         HELLO deadline with a readable reason
 */
#include "../harness.h"
#include "fault_util.h"

#include "ipc/fdpass.h"

#include <sys/socket.h>
#include <sys/un.h>

#define OTHER 65534 /* nobody / nogroup */

static struct sh_result R;

static void need_root(void)
{
	if (getuid() != 0)
		VE_SKIP("needs root (to act as a second user)");
}

VE_TEST(ved_socket_mode)
{
	FU_VED("mode", "VE_VED_POLICY=tput");
	struct stat st, dt;
	VE_CHECK(stat(fu_ved_sock, &st) == 0);
	VE_CHECK_MSG((st.st_mode & 0777) == 0600, "socket mode %o", st.st_mode & 0777);
	char dev[200];
	snprintf(dev, sizeof(dev), "%s/mode/vitamin-e", fu_scratch());
	VE_CHECK(stat(dev, &dt) == 0); /* the device lock's folder ved made */
	VE_CHECK_MSG((dt.st_mode & 0777) == 0700, "folder mode %o", dt.st_mode & 0777);
	VE_CHECK_EQ(fu_ved_stop(), 0);
}

VE_TEST(ved_one_per_device)
{
	FU_VED("first", "VE_VED_POLICY=tput");
	char bin[PATH_MAX], sock2[240], xdg[200], dir2[200];
	VE_CHECK(vh_find(sh_build, bin, sizeof(bin)));
	snprintf(dir2, sizeof(dir2), "%s/second", fu_scratch());
	mkdir(dir2, 0700);
	snprintf(sock2, sizeof(sock2), "%s/ved-0.sock", dir2);
	snprintf(xdg, sizeof(xdg), "XDG_RUNTIME_DIR=%s/first", fu_scratch());
	const char *argv[] = {bin, "--socket", sock2, "--config", "/dev/null", NULL};
	const char *env[] = {xdg, NULL};
	fu_run(argv, env, 10, &R);
	if (R.rc != 1)
		sh_dump(&R);
	VE_CHECK_EQ(R.rc, 1);
	char pid[32];
	snprintf(pid, sizeof(pid), "pid %d", (int)fu_ved_pid);
	VE_CHECK_MSG(strstr(R.out, pid) && strstr(R.out, fu_ved_sock),
		     "the refusal does not name the first ved (%s, %s)", pid, fu_ved_sock);
	VE_CHECK_MSG(access(sock2, F_OK) != 0, "the second ved made its socket anyway");
	VE_CHECK(fu_status(fu_ved_sock) != NULL); /* the first one is untouched */
	VE_CHECK_EQ(fu_ved_stop(), 0);
}

/* A process of uid OTHER listening on path (bound as root first when
 * bind_as_root, so it can sit in a folder of ours), accepting and never
 * answering. Returns its pid. */
static pid_t fake_server(const char *path, bool bind_as_root)
{
	int ready[2];
	if (pipe(ready))
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(ready[0]);
		int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
		if (bind_as_root && bind(fd, (struct sockaddr *)&sa, sizeof(sa)))
			_exit(2);
		if (setgid(OTHER) || setuid(OTHER))
			_exit(3);
		if (!bind_as_root && bind(fd, (struct sockaddr *)&sa, sizeof(sa)))
			_exit(4);
		if (listen(fd, 64))
			_exit(5);
		if (write(ready[1], "x", 1) != 1)
			_exit(6);
		for (;;) {
			int c = accept(fd, NULL, NULL);
			(void)c; /* held open, never answered */
		}
	}
	close(ready[1]);
	char x;
	bool ok = read(ready[0], &x, 1) == 1;
	close(ready[0]);
	if (!ok) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	return pid;
}

static void reap(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

VE_TEST(ved_dir_hijack)
{
	need_root();
	SH_PROG(path, "prog_shim_streams");
	char xdg[200], dir[220], sock[240];
	snprintf(xdg, sizeof(xdg), "%s/hijack", fu_scratch());
	mkdir(xdg, 0755);
	chmod(fu_scratch(), 0711);
	snprintf(dir, sizeof(dir), "%s/vitamin-e", xdg);
	mkdir(dir, 0700);
	VE_CHECK(chown(dir, OTHER, OTHER) == 0); /* the other user made it first */
	snprintf(sock, sizeof(sock), "%s/ved-0.sock", dir);
	pid_t attacker = fake_server(sock, false);
	VE_CHECK_MSG(attacker > 0, "the second user's server did not start");
	char env_xdg[240];
	snprintf(env_xdg, sizeof(env_xdg), "XDG_RUNTIME_DIR=%s", xdg);
	const char *argv[] = {path, "chains", NULL};
	/* Found by itself (VE_DAEMON unset): refused, embedded, a warning. */
	struct sh_opts o = {.shim = true, .expect_green = 1, .seed = 3, .timeout_s = 30,
			    .env = {env_xdg, "VE_DAEMON="}};
	sh_run(argv, &o, &R);
	bool said = strstr(R.out, "belongs to uid 65534") != NULL;
	if (R.rc != 0 || !said)
		sh_dump(&R);
	VE_CHECK_EQ(R.rc, 0);
	VE_CHECK_MSG(said, "no warning about the other user's folder");
	/* Asked for explicitly (VE_DAEMON=1): the same refusal, safe mode. */
	o.env[1] = "VE_DAEMON=1";
	sh_run(argv, &o, &R);
	if (R.rc != 0)
		sh_dump(&R);
	VE_CHECK_EQ(R.rc, 0);
	VE_CHECK(strstr(R.out, "belongs to uid 65534"));
	/* Strict: no fallback. */
	o.env[2] = "VE_STRICT=1";
	sh_run(argv, &o, &R);
	VE_CHECK_MSG(R.rc == 78, "VE_STRICT=1: status %d", R.rc);
	VE_CHECK(!strstr(R.out, "launch-log"));
	/* ve-ctl refuses to talk to it too. */
	FU_BIN(ctl, "ve-ctl");
	const char *cargv[] = {ctl, "status", NULL};
	const char *cenv[] = {env_xdg, "VE_DAEMON=", NULL};
	fu_run(cargv, cenv, 10, &R);
	VE_CHECK_EQ(R.rc, 1);
	VE_CHECK(strstr(R.out, "belongs to uid 65534"));
	reap(attacker);
}

VE_TEST(ved_server_uid)
{
	need_root();
	char dir[200], sock[240], err[512];
	snprintf(dir, sizeof(dir), "%s/peer", fu_scratch());
	mkdir(dir, 0700);
	snprintf(sock, sizeof(sock), "%s/ved-0.sock", dir);
	pid_t srv = fake_server(sock, true);
	VE_CHECK(srv > 0);
	int fd = ve_ctl_connect_checked(sock, err, sizeof(err));
	if (fd >= 0)
		close(fd);
	reap(srv);
	VE_CHECK_EQ(fd, -EPERM);
	VE_CHECK_MSG(strstr(err, "uid 65534"), "reason: %s", err);
}

VE_TEST(ved_open_folder)
{
	char dir[200], sock[240], err[512];
	snprintf(dir, sizeof(dir), "%s/open", fu_scratch());
	mkdir(dir, 0700);
	chmod(dir, 0777);
	snprintf(sock, sizeof(sock), "%s/ved-0.sock", dir);
	VE_CHECK_EQ(ve_ctl_connect_checked(sock, err, sizeof(err)), -EPERM);
	VE_CHECK_MSG(strstr(err, "writable by other users"), "reason: %s", err);
	if (getuid() != 0)
		return;
	/* A sticky shared folder: only a socket of ours (or root's) will do. */
	chmod(dir, 01777);
	pid_t srv = fake_server(sock, false);
	VE_CHECK(srv > 0);
	int fd = ve_ctl_connect_checked(sock, err, sizeof(err));
	if (fd >= 0)
		close(fd);
	reap(srv);
	VE_CHECK_EQ(fd, -EPERM);
	VE_CHECK_MSG(strstr(err, "belongs to uid 65534"), "reason: %s", err);
}

/* Connects and sends a STATUS_REQ at once (as HELLO would come), then reads
 * the answer: the message type, or -errno. The refusal's text in why. */
static int ask(const char *sock, char *why, size_t n, int *fd_out)
{
	int fd = ve_ctl_connect(sock);
	if (fd < 0)
		return fd;
	struct ve_ctl_status_req q;
	memset(&q, 0, sizeof(q));
	ve_ctl_hdr_init(&q.h, VE_CTL_STATUS_REQ, sizeof(q));
	ve_ctl_send(fd, &q, sizeof(q));
	int k = ve_ctl_recv(fd, fu_msg.b, sizeof(fu_msg.b), NULL, 5000);
	int type = k < 0 ? k : k == 0 ? -ESHUTDOWN : ((const struct ve_ctl_hdr *)fu_msg.b)->type;
	if (type == VE_CTL_REFUSE)
		snprintf(why, n, "%.256s",
			 ((const struct ve_ctl_refuse *)(const void *)fu_msg.b)->msg);
	if (fd_out)
		*fd_out = fd;
	else
		close(fd);
	return type;
}

VE_TEST(ved_refusal_readable)
{
	FU_VED("limit", "VE_VED_MAX_CONNS_PER_UID=2", "VE_VED_HELLO_TIMEOUT_MS=60000");
	usleep(200 * 1000); /* the start-up probe's connection is gone */
	int a = ve_ctl_connect(fu_ved_sock), b = ve_ctl_connect(fu_ved_sock);
	VE_CHECK(a >= 0 && b >= 0);
	/* Once ved has accepted both (on a busy machine that may take a while),
	 * a third connection is refused, and the refusal must be read as text. */
	char why[300] = "";
	int t = -1;
	for (int i = 0; i < 50 && t != VE_CTL_REFUSE; i++) {
		usleep(100 * 1000);
		t = ask(fu_ved_sock, why, sizeof(why), NULL);
		if (t < 0)
			break; /* ECONNRESET or a hang-up: what must not happen */
	}
	VE_CHECK_MSG(t == VE_CTL_REFUSE, "the third connection read %d (%s), not a REFUSE", t,
		     t < 0 ? strerror(-t) : "a message");
	VE_CHECK_MSG(strstr(why, "too many connections"), "refusal: %s", why);
	close(a);
	close(b);
	usleep(100 * 1000);
	VE_CHECK_EQ(ask(fu_ved_sock, why, sizeof(why), NULL), VE_CTL_STATUS);
	VE_CHECK_EQ(fu_ved_stop(), 0);
}

VE_TEST(ved_idle_flood)
{
	need_root();
	chmod(fu_scratch(), 0711);
	/* The socket's folder as ved makes it with 'group': 0750, the group's. */
	char dir[200];
	snprintf(dir, sizeof(dir), "%s/flood", fu_scratch());
	mkdir(dir, 0750);
	VE_CHECK(chown(dir, (uid_t)-1, OTHER) == 0 && chmod(dir, 0750) == 0);
	FU_VED("flood", "VE_VED_GROUP=65534", "VE_VED_HELLO_TIMEOUT_MS=1500");
	usleep(200 * 1000);
	int res[2];
	VE_CHECK(pipe(res) == 0);
	pid_t att = fork();
	if (att == 0) {
		/* The other user: 170 connections, idle. */
		close(res[0]);
		if (setgid(OTHER) || setuid(OTHER))
			_exit(3);
		int all[170], fds[170], held = 0, refused_text = 0, other = 0;
		for (int i = 0; i < 170; i++)
			all[i] = ve_ctl_connect(fu_ved_sock);
		/* ved accepts or refuses at once: a refusal arrives as a REFUSE. */
		usleep(300 * 1000);
		for (int i = 0; i < 170; i++) {
			int fd = all[i];
			if (fd < 0) {
				other++;
				continue;
			}
			int k = ve_ctl_recv(fd, fu_msg.b, sizeof(fu_msg.b), NULL, 0);
			if (k == -ETIMEDOUT) {
				fds[held++] = fd;
				continue;
			}
			if (k > 0 && ((const struct ve_ctl_hdr *)fu_msg.b)->type == VE_CTL_REFUSE)
				refused_text++;
			else
				other++;
			close(fd);
		}
		int counts[4] = {held, refused_text, other, 0};
		if (write(res[1], counts, sizeof(int) * 3) != (ssize_t)(sizeof(int) * 3))
			_exit(4);
		/* The held ones are closed at the HELLO deadline, with a reason. */
		for (int i = 0; i < held; i++) {
			int k = ve_ctl_recv(fds[i], fu_msg.b, sizeof(fu_msg.b), NULL, 5000);
			counts[3] += k > 0 && ((const struct ve_ctl_hdr *)fu_msg.b)->type == VE_CTL_REFUSE &&
				     strstr(((const struct ve_ctl_refuse *)(const void *)fu_msg.b)->msg,
					    "hello_timeout_ms");
		}
		if (write(res[1], &counts[3], sizeof(int)) != sizeof(int))
			_exit(5);
		_exit(0);
	}
	close(res[1]);
	int counts[4] = {0};
	bool got = read(res[0], counts, sizeof(int) * 3) == (ssize_t)(sizeof(int) * 3);
	/* While the other user holds its connections, ved's owner gets in. */
	char why[300] = "";
	int t = ask(fu_ved_sock, why, sizeof(why), NULL);
	got = got && read(res[0], &counts[3], sizeof(int)) == sizeof(int);
	close(res[0]);
	int st;
	waitpid(att, &st, 0);
	printf("# other user: %d held, %d refused with a reason, %d otherwise; %d of the held "
	       "closed at the HELLO deadline with a reason; owner's request: %d\n",
	       counts[0], counts[1], counts[2], counts[3], t);
	VE_CHECK_MSG(got && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the other user's process: %#x",
		     st);
	VE_CHECK_MSG(t == VE_CTL_STATUS, "the owner was locked out (%d: %s)", t, why);
	VE_CHECK(counts[0] > 0 && counts[0] <= 24); /* max_clients + 8 */
	VE_CHECK_EQ(counts[1], 170 - counts[0]);
	VE_CHECK_EQ(counts[3], counts[0]);
	const struct ve_ctl_status *m = fu_status(fu_ved_sock);
	VE_CHECK(m && m->hello_timeouts >= (uint64_t)counts[0]);
	VE_CHECK_EQ(fu_ved_stop(), 0);
}

/* Control messages of every malformed shape, over real sockets: random
 * bytes, truncated and lying headers, oversized and empty datagrams, file
 * descriptors nobody asked for, HELLOs out of range, a second HELLO. ved
 * refuses each, stays up with its self-check on, and serves a real client
 * afterwards (ved_garbage). */
VE_TEST(ved_garbage)
{
	FU_VED("garbage", "VE_VED_POLICY=tput", "VE_VED_HELLO_TIMEOUT_MS=300");
	uint64_t r = ve_test_seed(0x6a7b);
	printf("# VE_SEED=%llu\n", (unsigned long long)r);
	static uint8_t big[VE_CTL_MAX_MSG + 4096];
	for (int i = 0; i < 600; i++) {
		int fd = ve_ctl_connect(fu_ved_sock);
		VE_CHECK_MSG(fd >= 0, "ved stopped accepting after %d connections", i);
		union {
			uint8_t b[4096];
			struct ve_ctl_hello h;
			uint64_t align;
		} m;
		memset(&m, 0, sizeof(m));
		ve_ctl_hdr_init(&m.h.h, VE_CTL_HELLO, sizeof(m.h));
		m.h.ipc_version = 1;
		m.h.nleaves = 16;
		for (int k = 0; k < 16; k++)
			m.h.leaf_sms[k] = k < 15 ? 8 : 12;
		size_t len = sizeof(m.h);
		uint32_t how = (uint32_t)(ve_test_rand(&r) % 9);
		switch (how) {
		case 0:
			len = 1 + ve_test_rand(&r) % sizeof(m.b);
			for (size_t k = 0; k < len; k++)
				m.b[k] = (uint8_t)ve_test_rand(&r);
			break;
		case 1:
			len = ve_test_rand(&r) % sizeof(m.h); /* truncated, 0 included */
			break;
		case 2:
			m.h.h.len = (uint32_t)(ve_test_rand(&r) % 70000);
			break;
		case 3:
			m.b[ve_test_rand(&r) % sizeof(m.h)] ^= (uint8_t)(1u << (ve_test_rand(&r) % 8));
			break;
		case 4:
			m.h.nleaves = 0;
			break;
		case 5:
			send(fd, big, sizeof(big), MSG_NOSIGNAL | MSG_DONTWAIT); /* oversized */
			len = 0;
			break;
		case 6: { /* a file descriptor ved never asked for, then a HELLO */
			int devnull = open("/dev/null", O_RDONLY);
			ve_fd_send(fd, devnull, &m.h, sizeof(m.h));
			close(devnull);
			len = 0;
			break;
		}
		case 7: /* the version of another release */
			m.h.h.version = 99;
			break;
		default: /* a request, then a HELLO on the same connection */
			break;
		}
		if (how == 8) {
			struct ve_ctl_status_req q;
			memset(&q, 0, sizeof(q));
			ve_ctl_hdr_init(&q.h, VE_CTL_STATUS_REQ, sizeof(q));
			ve_ctl_send(fd, &q, sizeof(q));
		}
		if (len)
			send(fd, m.b, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (i % 50 == 0) /* sometimes wait for the answer or the hang-up */
			ve_ctl_recv(fd, fu_msg.b, sizeof(fu_msg.b), NULL, 1000);
		close(fd);
	}
	/* ved may still be closing the last of them (each holds a slot of this
	 * uid until then): ask for a while. */
	const struct ve_ctl_status *m = NULL;
	for (int t = 0; t < 100 && !m; t++) {
		m = fu_status(fu_ved_sock);
		if (!m)
			usleep(50 * 1000);
	}
	VE_CHECK_MSG(m != NULL, "no status after the garbage");
	printf("# %llu refused, %llu closed at the HELLO deadline\n", (unsigned long long)m->refused,
	       (unsigned long long)m->hello_timeouts);
	/* A real client still works. */
	SH_PROG(path, "prog_shim_streams");
	char daemon[200];
	snprintf(daemon, sizeof(daemon), "VE_DAEMON=%s", fu_ved_sock);
	const char *argv[] = {path, "chains", NULL};
	struct sh_opts o = {.shim = true, .expect_green = 1, .seed = 12, .env = {daemon}};
	SH_RUN_OK(argv, &o);
	int rc = fu_ved_stop();
	if (rc)
		fu_ved_dump_log();
	VE_CHECK_EQ(rc, 0);
}
