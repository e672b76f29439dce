"""GSSAPI (Kerberos) login of pwevent's Python Kafka clients (docs/operations.md, "Security",
"GSSAPI"): the same principal and keytab as the job's Java clients (`kafka.security.kerberos`).

kafka-python's GSSAPI mechanism takes the default initiator credentials of the process (the `gssapi`
package over the system's MIT Kerberos library). `python_login` makes them the configured
principal's: it points the process at the keytab (`KRB5_CLIENT_KTNAME`, from which the library also
renews the ticket when it expires), at a ticket cache of its own (`KRB5CCNAME`, in memory, so that a
ticket cache of the user's is neither read nor overwritten) and, with `krb5_conf`, at that Kerberos
configuration (`KRB5_CONFIG`), then logs in: a ticket-granting ticket for the principal from the
keytab, stored as the cache's default. Every Python client of the process (the job's start check, the
Population's, `produce`, `tail`) then authenticates as that principal.
"""

from __future__ import annotations

import os

from pwevent.jobs.common.extras import KERBEROS

_logged_in: set[tuple[str, str, str | None]] = set()


class KerberosLoginError(RuntimeError):
    """The principal could not log in from its keytab (no KDC answered, a key that does not match,
    an unknown principal); the CLI prints the message and exits with code 4."""


def python_login(principal: str, keytab: str, krb5_conf: str | None) -> None:
    """Make `principal`, logged in from `keytab`, the default Kerberos credentials of this process
    (module docstring). Its ticket cache is `MEMORY:pwevent-<principal>`, so that several principals
    in one process (a test's admin and job) do not share one; the login itself happens once per
    (principal, keytab, krb5_conf). Raises MissingExtraError without the extra `kerberos` (`gssapi`),
    KerberosLoginError when the login fails (the process's Kerberos settings then stay as they
    were)."""
    KERBEROS.require()
    import gssapi

    cache = f"MEMORY:pwevent-{principal}"
    settings = {"KRB5_CLIENT_KTNAME": keytab, "KRB5CCNAME": cache}
    if krb5_conf is not None:
        settings["KRB5_CONFIG"] = krb5_conf
    before = {variable: os.environ.get(variable) for variable in settings}
    os.environ.update(settings)
    key = (principal, keytab, krb5_conf)
    if key in _logged_in:
        return
    try:
        who = gssapi.Name(principal, gssapi.NameType.kerberos_principal)
        credentials = gssapi.Credentials(name=who, usage="initiate", store={"client_keytab": keytab, "ccache": cache})
        credentials.store(store={"ccache": cache}, overwrite=True, set_default=True)
    except gssapi.exceptions.GSSError as err:
        for variable, value in before.items():  # a failed login leaves the process's settings as they were
            if value is None:
                os.environ.pop(variable, None)
            else:
                os.environ[variable] = value
        raise KerberosLoginError(
            f"kafka.security.kerberos: {principal} could not log in from the keytab {keytab}: "
            f"{' '.join(str(err).split())}") from None
    _logged_in.add(key)
