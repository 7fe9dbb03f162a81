# JupyterHub for a class (`make hub`, tools/teaching/hub.py): one server, a login and a Unix
# account per student, the lessons pulled with one nbgitpuller link. The values come from
# HUB_* variables through tools/teaching/classroom.py (TEACHING.md).
# JupyterHub runs this file with `c` (its config object) defined.
# ruff: noqa: F821

import asyncio
import atexit
import importlib
import inspect
import os
import sys

from jupyterhub.auth import DummyAuthenticator, LocalAuthenticator
from jupyterhub.spawner import LocalProcessSpawner
from nativeauthenticator import NativeAuthenticator

from tools.teaching import classroom, hubauth, hubsite

s = classroom.settings()

# --- Where it listens -----------------------------------------------------------------
# Students reach the proxy only; 127.0.0.1 unless the teacher opens it (HUB_IP, with TLS).
c.JupyterHub.bind_url = s.url
# The hub's API and the proxy's API stay on loopback, on ports of their own (two hubs, e.g.
# a test beside a class, must not meet on JupyterHub's defaults 8081 and 8001).
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = s.hub_port
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{s.proxy_api_port}"
# configurable-http-proxy from npm, pinned in tools/teaching/proxy (never a global install).
c.ConfigurableHTTPProxy.command = [str(classroom.PROXY)]
if s.ssl_cert:  # TLS at the proxy when no reverse proxy in front terminates it
    c.JupyterHub.ssl_cert, c.JupyterHub.ssl_key = s.ssl_cert, s.ssl_key

# --- Private state, outside the checkout -------------------------------------------------
# Users, sign-ups (bcrypt hashes) and tokens: root-only, so no student reads another's token.
c.JupyterHub.db_url = f"sqlite:///{s.state_dir / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(s.state_dir / "jupyterhub_cookie_secret")
c.ConfigurableHTTPProxy.pid_file = str(s.state_dir / "jupyterhub-proxy.pid")
# After signing in: the home page (start/stop, and for the teacher the admin and approval
# pages), not a server started on every login: the link starts one when a student needs it.
c.JupyterHub.redirect_to_server = False
# Stopping the hub stops the students' servers too (nothing left running as a student).
c.JupyterHub.cleanup_servers = True


# --- Who gets in ------------------------------------------------------------------------
class _Classroom(LocalAuthenticator):
    """A Unix account for each student on first sign-in (LocalAuthenticator), recorded in the
    hub's state folder; never root, a system account, a person's existing account or another
    hub's or term's student, though in the students' group (their files would open)."""

    def check_blocked_users(self, username, authentication=None):
        if not classroom.is_student_or_teacher(username, s.teacher, classroom.made_accounts(s)):
            self.log.warning("Refused %s: a Unix account this hub did not create", username)
            return False
        return super().check_blocked_users(username, authentication)

    async def add_system_user(self, user):
        done = super().add_system_user(user)
        if inspect.isawaitable(done):
            await done
        classroom.record_account(s, user.name)  # made here: this hub may serve it


class ClassNativeAuthenticator(_Classroom, NativeAuthenticator):
    """Students sign up with a password; the teacher approves each at /hub/authorize."""

    # --- hubsec: no state change by GET, names that can sign in (tools/teaching/hubauth.py)
    def get_handlers(self, app):
        # approve/revoke/discard only by POST with the XSRF token; sign-up refuses, with the
        # rule, a name that could never sign in (pattern, or an account the hub did not make)
        ours = hubauth.handlers(
            lambda name: classroom.is_student_or_teacher(
                name, s.teacher, classroom.made_accounts(s)
            ),
            s.teacher,
        )
        return hubauth.replace_handlers(super().get_handlers(app), ours)


class ClassDummyAuthenticator(_Classroom, DummyAuthenticator):
    """Tests and benchmarks only: one shared password, refused off loopback (classroom.py)."""


if s.authenticator == "native":
    # NativeAuthenticator (jupyterhub-nativeauthenticator): sign-up page, passwords hashed in
    # the hub's database, the teacher approves each sign-up. No e-mail or outside service
    # needed (classrooms are often offline), unlike OAuth; unlike first-use passwords, a name
    # cannot be claimed by whoever types it first: nobody is in until the teacher approves.
    c.JupyterHub.authenticator_class = ClassNativeAuthenticator
    import nativeauthenticator

    # its sign-up, approval and password pages
    # (the approval page first from tools/teaching/templates: its buttons POST, hubauth.py)
    c.JupyterHub.template_paths = [
        str(hubauth.TEMPLATES),
        os.path.join(os.path.dirname(nativeauthenticator.__file__), "templates"),
    ]
    c.NativeAuthenticator.open_signup = False  # every sign-up waits for the teacher
    c.NativeAuthenticator.minimum_password_length = 8
    c.NativeAuthenticator.check_common_password = True  # refuses the 10,000 most common
    c.NativeAuthenticator.allowed_failed_logins = 5  # then the name is locked for 10 minutes
    # NativeAuthenticator refuses whoever the teacher has not approved, so the hub's own
    # allow list (empty = nobody in JupyterHub 5) lets every approved name through.
    c.Authenticator.allow_all = True
else:
    c.JupyterHub.authenticator_class = ClassDummyAuthenticator
    c.DummyAuthenticator.password = os.environ["HUB_DUMMY_PASSWORD"]  # hub.py checks it
    c.Authenticator.allow_all = True

# The teacher is the only admin (approves sign-ups, sees who runs what, stops servers).
c.Authenticator.admin_users = {s.teacher}
# JupyterHub's admin role includes access:servers: the teacher can open a student's server
# (to help them, and so to see their files); README says so. (admin_access, which once turned
# that off, is deprecated since JupyterHub 2 and does nothing.)
# Names become Unix login names: lower-case letter first, then letters, digits, - or _.
c.Authenticator.username_pattern = hubauth.USERNAME_PATTERN
# A Unix account with a private home (0700) for each new user, in the students' group.
c.LocalAuthenticator.create_system_users = True
c.LocalAuthenticator.add_user_cmd = classroom.add_user_cmd()


# --- Each student's server ---------------------------------------------------------------
class ClassSpawner(LocalProcessSpawner):
    """JupyterHub's LocalProcessSpawner (a process as the student, in their home), whose
    processes are put in the student's cgroups (memory, processes, CPU share): LocalProcessSpawner
    itself does not enforce mem_limit (its documentation says so), and it stops only the server's
    own process, so stop() (the API's DELETE and the culler alike) kills the rest of the
    student's processes, detached ones too."""

    async def start(self):
        where = await super().start()
        if CGROUPS is not None:
            CGROUPS.confine(self.user.name, self.pid, s.mem_limit)
        return where

    async def stop(self, now=False):
        await super().stop(now=now)
        if CGROUPS is not None:  # off the event loop: ending processes waits (bounded)
            await asyncio.to_thread(CGROUPS.release, self.user.name)


CGROUPS, _memory_line = classroom.class_cgroups(
    classroom.class_cgroup_name(s), max(s.mem_limit, classroom.mem_total() - s.mem_reserve)
)
print(f"make hub: per-student limits: {_memory_line}", file=sys.stderr, flush=True)
if CGROUPS is not None:  # the hub stops: no student's processes or folders stay behind
    atexit.register(CGROUPS.remove)
    # Cgroups.release removes folders with the grader's Cgroup: imported now (2-3 s), not in
    # the hub's event loop at the first server stop.
    importlib.import_module("tools.teaching.sandbox")
# LocalProcessSpawner plus the cgroup above (ClassSpawner); as root, a process per student.
c.JupyterHub.spawner_class = ClassSpawner
# The project's venv runs every server and kernel: the pinned PyTorch, Lab, nbgitpuller.
c.Spawner.cmd = [str(classroom.VENV_PYTHON), "-m", "jupyterhub.singleuser"]
c.Spawner.default_url = "/lab"  # JupyterLab, as `make lab`
c.Spawner.notebook_dir = "~"  # the student's home: nbgitpuller clones the lessons into it
# make lab's Lab options: nothing leaves the machine (classrooms are often offline).
c.Spawner.args = [
    "--LabApp.news_url=None",
    "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    # A kernel whose notebook tab was closed holds PyTorch's memory until the server stops: the
    # server ends kernels idle for 20 minutes with no tab connected (an open tab keeps its own).
    "--MappingKernelManager.cull_idle_timeout=1200",
    "--MappingKernelManager.cull_interval=120",
]
c.Spawner.environment = classroom.student_environment(s)
c.Spawner.mem_limit = s.mem_limit  # shown to the server as MEM_LIMIT; ClassSpawner enforces it
# A first start imports PyTorch's neighbours from a cold disk; on a busy machine that is slow.
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 120

# --- Fair share of the machine ------------------------------------------------------------
# Servers running at once, from memory (classroom.settings): the next student is told
# "Active user limit exceeded. Try again in a few minutes." instead of the machine running out.
c.JupyterHub.active_server_limit = s.active_limit
# Servers starting at once (each start costs CPU): the next is refused with "Too many users
# trying to log in right now. Try again in ... seconds." and a click again starts it.
c.JupyterHub.concurrent_spawn_limit = s.spawn_limit

# --- Kernels forked with PyTorch imported (tools/teaching/kernelfork.py) -------------------
# A kernel's own `import torch` costs ~370 MiB; forked from one process that has imported it,
# the pages stay shared. The fork server (a service of the hub, root) forks only for a server
# confined in a student's cgroups, and the kernel joins them: without cgroups, no fork server,
# and kernels start as usual.
c.Spawner.args = [
    *c.Spawner.args,
    "--KernelProvisionerFactory.default_provisioner_name=blitz-forked",
]
_fork_server = []
if CGROUPS is not None:
    import blitz_hubkernel as hubkernel

    from tools.teaching import kernelfork

    c.Spawner.environment[hubkernel.SOCKET_ENV] = str(s.kernel_socket)
    _fork_server = [
        {
            "name": "kernel-fork",
            "command": [
                str(classroom.VENV_PYTHON),
                "-m",
                "tools.teaching.kernelfork",
                str(s.kernel_socket),
            ],
            "cwd": str(classroom.ROOT),
            # the kernels' thread settings, read by OpenMP and OpenBLAS as they load
            "environment": {
                **{k: v for k, v in c.Spawner.environment.items() if k.endswith("_NUM_THREADS")},
                kernelfork.CGROUPS_ENV: kernelfork.cgroups_json(CGROUPS),
            },
        }
    ]

# --- Idle servers ---------------------------------------------------------------------------
# jupyterhub-idle-culler stops servers idle for HUB_CULL_TIMEOUT seconds (files stay; a
# student's next click starts the server again), returning their memory to the class.
c.JupyterHub.services = [
    {
        "name": "idle-culler",
        "command": [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={s.cull_timeout}"],
    },
    *_fork_server,
]
# the scopes its documentation lists for culling servers (not users)
c.JupyterHub.load_roles = [
    {
        "name": "idle-culler",
        "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
        "services": ["idle-culler"],
    }
]

# --- hubsec: whose pages run with whose session; what a server and its terminal run ----------
# (tools/teaching/hubsite.py says why, after JupyterHub's security overview)
if hubsite.domain():
    # each student's server on a site of its own (<name>.HUB_DOMAIN): its pages cannot act
    # with the teacher's hub session, so the teacher may open students' servers
    c.JupyterHub.subdomain_host = hubsite.public_url(s.url, s.port)
    # over TLS, `__Host-` cookies: a student's site cannot set ("toss") a cookie the hub reads
    # (JupyterHub's overview recommends it with per-user domains; it needs HTTPS)
    c.JupyterHub.cookie_host_prefix_enabled = bool(s.ssl_cert)
else:
    # one origin for the hub and every server: the teacher's browser never loads a student's
    # server (JupyterHub refuses to change the admin role's scopes, so the teacher is not
    # an admin but holds a role of the admin's scopes less access:servers and shares)
    from jupyterhub.roles import get_default_roles

    _admin = next(r for r in get_default_roles() if r["name"] == "admin")
    c.Authenticator.admin_users = set()
    # and nobody else either: a hub started before with HUB_DOMAIN (or an older make hub) left
    # the teacher in the admin role in its database; a role spec naming users resets them
    c.JupyterHub.load_roles.append({"name": "admin", "users": []})
    c.Authenticator.allowed_users = {s.teacher}  # NativeAuthenticator: no approval needed
    c.JupyterHub.load_roles.append(
        {
            "name": "teacher",
            "description": "The admin's powers but opening students' servers (one origin)",
            "scopes": hubsite.admin_scopes(_admin["scopes"]),
            "users": [s.teacher],
        }
    )
# a student cannot change what their server runs: no ~/.jupyter config, and the venv's Python
# isolated from the home folder it starts in, the user's site-packages and PYTHON* variables
c.Spawner.disable_user_config = True
c.Spawner.cmd = hubsite.server_cmd(classroom.VENV_PYTHON)
# Lab's terminal: an interactive, non-login bash, which keeps the venv first on PATH (`python`
# is the lessons' Python); a login shell's /etc/profile would reset PATH
c.Spawner.args = [*c.Spawner.args, hubsite.terminal_arg()]
