#!/bin/sh
# The AWS credential chain against s3rver: `pinio load s3://...` byte-exact
# (--sha256) with keys from web identity (environment and profile: STS
# AssumeRoleWithWebIdentity), an assumed role (role_arn + source_profile:
# AssumeRole signed with the source's keys, or with credential_source's: the
# container endpoint's or IMDS's), credential_process, SSO (an sso_session
# and the legacy start URL: GetRoleCredentials with the cached token), the
# container endpoint (full URI, token file) and IMDSv2 (the token checked),
# all served by credserver.py handing out s3rver's keys; credentials that
# expire within the refresh window fetched again during the load, long-lived
# ones once; a configured source that fails (STS 403, a malformed answer, a
# missing token file, a process exiting 1, a refused container token, a
# container host not allowed, a credential_source with no keys or of a name
# botocore does not take, an expired or refused SSO token) an error naming
# the source; no instance metadata (nothing listening, or a server that
# never answers: one try) anonymous; no token ever printed.
# usage: s3_creds_test.sh PINIO SRC_ROOT
[ "${1:-}" = --help ] && { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
PINIO=$1
SRC=$2
. "$SRC/tests/s3/s3env.sh"
s3_test s3creds models
"$PINIO" gen "$DIR/one.safetensors" --size 4M --seed 3 >/dev/null || exit 1
s3_put models one.safetensors "$DIR/one.safetensors" || exit 1
SUM=$(sha256sum "$DIR/one.safetensors" | cut -d' ' -f1)
URL=s3://models/one.safetensors
printf 'pinio-test-web-identity-token' >"$DIR/web.token"  # as Kubernetes writes it: no line break
printf 'a-wrong-token-NeverPrint\n' >"$DIR/wrong.token"

# Every credential variable unset: each case sets its own.
creds_clear() {
    unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE AWS_ROLE_ARN \
        AWS_WEB_IDENTITY_TOKEN_FILE AWS_ROLE_SESSION_NAME AWS_ENDPOINT_URL_STS \
        AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_AUTHORIZATION_TOKEN \
        AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE AWS_EC2_METADATA_SERVICE_ENDPOINT
    export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
    export AWS_EC2_METADATA_DISABLED=true
}
# No session token, web identity token or secret in anything printed.
no_secret() {
    if grep -q -e NeverPrint -e pinio-test-web-identity-token "$DIR/out" "$DIR/err"; then
        echo "FAIL: $1: a secret printed:"; cat "$DIR/out" "$DIR/err"; fails=$((fails + 1))
    fi
}
load_ok() {
    check 0 "$1: load" "$PINIO" load "$URL" --sha256 "$SUM"
    has "$DIR/out" "sha256    $SUM  $URL" "$1: byte-exact"
    no_secret "$1"
}
load_fails() {
    check 1 "$1: load must fail" "$PINIO" load "$URL"
    has "$DIR/err" "$2" "$1: the error names the source"
    no_secret "$1"
}
sts_start() { cred_start "$@"; export AWS_ENDPOINT_URL_STS=$CRED_URL; }
# boto_same NAME WANT: botocore (Debian's python3-botocore) resolves WANT
# ("METHOD KEY SECRET-DIGEST TOKEN-DIGEST", botocore_check.py --creds) from
# the same environment; skipped, saying so, where botocore is missing.
hash16() { printf %s "$1" | sha256sum | cut -c1-16; }
SRV="S3RVER $(hash16 S3RVER) $(hash16 pinio-test-session-NeverPrint)"
boto_same() {
    got=$(/usr/bin/python3 "$SRC/tests/s3/botocore_check.py" --creds 2>&1)
    rc=$?
    [ $rc -eq 77 ] && { echo "note: $1: botocore not installed, not cross-checked"; return; }
    [ "$got" = "$2" ] || { echo "FAIL: $1: botocore resolves '$got', want '$2'"; fails=$((fails + 1)); }
}
log_count() { grep -c -- "$1" "$DIR/cred.log"; }

# --- web identity from the environment ------------------------------------
creds_clear
cred_start
export AWS_ENDPOINT_URL_STS=$CRED_URL AWS_ROLE_ARN=arn:aws:iam::123456789012:role/pinio-test
export AWS_WEB_IDENTITY_TOKEN_FILE=$DIR/web.token AWS_ROLE_SESSION_NAME=pinio-ci
load_ok "web identity"
[ "$(log_count 'Action=AssumeRoleWithWebIdentity RoleArn=arn:aws:iam::123456789012:role/pinio-test RoleSessionName=pinio-ci')" -eq 1 ] ||
    { echo "FAIL: web identity: not one AssumeRoleWithWebIdentity with the role and session name:"; cat "$DIR/cred.log"; fails=$((fails + 1)); }
boto_same "web identity" "assume-role-with-web-identity $SRV"
# pinio doctor s3://: the source, the key id's last 4 characters, region,
# endpoint and the object's HEAD; never a secret.
check 0 "doctor" "$PINIO" doctor "$URL"
has "$DIR/out" "^credentials  web identity (AWS_WEB_IDENTITY_TOKEN_FILE=$DIR/web.token)$" "doctor: the source"
has "$DIR/out" "^key id       \.\.\.RVER (expires 20" "doctor: the key id's end and the expiry"
has "$DIR/out" "^region       us-east-1$" "doctor: the region"
has "$DIR/out" "^endpoint     http://127.0.0.1:$S3_PORT (addressing auto)$" "doctor: the endpoint"
has "$DIR/out" "^object HEAD  $(wc -c <"$DIR/one.safetensors") bytes, ETag \"" "doctor: the HEAD"
has "$DIR/out" "^verdict      reachable$" "doctor: reachable"
no_secret "doctor"
grep -q S3RVER "$DIR/out" && { echo "FAIL: doctor prints the whole key id"; fails=$((fails + 1)); }
check 1 "doctor, a missing object" "$PINIO" doctor s3://models/nope
has "$DIR/out" "^object HEAD  FAILED: s3://models/nope: no such object" "doctor: the HEAD's failure"
has "$DIR/out" "^verdict      not reachable$" "doctor: not reachable"
# The data requests are signed with the keys fetched: keys s3rver does not
# know are refused (s3rver serves unsigned requests, so a byte-exact load
# alone would not tell).
sts_start --keys AKIDUNKNOWN unknown-secret
check 1 "web identity, keys s3rver does not know" "$PINIO" load "$URL"
has "$DIR/err" "403" "web identity: the requests signed with the fetched keys"
# Credentials within the 15-minute window are fetched again before a request.
sts_start --expire-in 300
load_ok "web identity, expiring"
n=$(log_count AssumeRoleWithWebIdentity)
[ "$n" -ge 2 ] || { echo "FAIL: expiring credentials fetched $n times, want a refresh"; fails=$((fails + 1)); }
# Failures name the source.
sts_start --fail 403 InvalidIdentityToken
load_fails "STS 403" "web identity (AWS_WEB_IDENTITY_TOKEN_FILE=$DIR/web.token): STS AssumeRoleWithWebIdentity answered HTTP 403 InvalidIdentityToken"
check 1 "doctor, STS 403" "$PINIO" doctor "$URL"
has "$DIR/out" "^credentials  FAILED: web identity (AWS_WEB_IDENTITY_TOKEN_FILE=$DIR/web.token): STS AssumeRoleWithWebIdentity answered HTTP 403 InvalidIdentityToken" "doctor: the failing source"
sts_start --malformed
load_fails "STS malformed" "web identity (AWS_WEB_IDENTITY_TOKEN_FILE=$DIR/web.token): a malformed answer"
sts_start
export AWS_WEB_IDENTITY_TOKEN_FILE=$DIR/wrong.token
load_fails "wrong web token" "answered HTTP 400 InvalidIdentityToken"
export AWS_WEB_IDENTITY_TOKEN_FILE=$DIR/missing.token
load_fails "missing token file" "web identity (AWS_WEB_IDENTITY_TOKEN_FILE=$DIR/missing.token): cannot read the token file"
unset AWS_ROLE_ARN
export AWS_WEB_IDENTITY_TOKEN_FILE=$DIR/web.token
load_fails "no role" "no role to assume"

# --- profiles: web_identity_token_file, role_arn + source_profile, process --
creds_clear
cred_start
export AWS_ENDPOINT_URL_STS=$CRED_URL AWS_CONFIG_FILE=$DIR/config AWS_PROFILE=wi
cat >"$DIR/proc.sh" <<EOF
#!/bin/sh
[ "\$1" = "--exit" ] && { echo "no credentials for \$2" >&2; exit 1; }
echo '{"Version": 1, "AccessKeyId": "S3RVER", "SecretAccessKey": "S3RVER", "SessionToken": "tok-NeverPrint", "Expiration": "2099-01-01T00:00:00Z"}'
EOF
chmod +x "$DIR/proc.sh"
cat >"$DIR/config" <<EOF
[profile wi]
role_arn = arn:aws:iam::123456789012:role/from-profile
web_identity_token_file = $DIR/web.token
role_session_name = profile-session
[profile base]
aws_access_key_id = AKIDBASE
aws_secret_access_key = base-secret-NeverPrint
[profile ar]
role_arn = arn:aws:iam::123456789012:role/assumed
source_profile = base
[profile proc]
credential_process = "$DIR/proc.sh" --ok
[profile procfail]
credential_process = $DIR/proc.sh --exit 'two words'
EOF
load_ok "profile web identity"
has "$DIR/cred.log" "RoleArn=arn:aws:iam::123456789012:role/from-profile RoleSessionName=profile-session" "the profile's role and session"
boto_same "profile web identity" "assume-role-with-web-identity $SRV"
export AWS_PROFILE=ar
# The AssumeRole call's signature is botocore's for the same request.
sts_start --verify-secret base-secret-NeverPrint
load_ok "assume role"
has "$DIR/cred.log" "Action=AssumeRole RoleArn=arn:aws:iam::123456789012:role/assumed .*Credential=AKIDBASE/[0-9]*/us-east-1/sts/aws4_request" "AssumeRole signed with the source profile's key"
boto_same "assume role" "assume-role $SRV"
sts_start --verify-secret another-secret
load_fails "assume role, a signature STS does not take" "assume role ($DIR/config \[ar\] role_arn=arn:aws:iam::123456789012:role/assumed, source_profile base): STS AssumeRole answered HTTP 403 SignatureDoesNotMatch"
export AWS_PROFILE=proc
load_ok "credential_process"
boto_same "credential_process" "custom-process S3RVER $(hash16 S3RVER) $(hash16 tok-NeverPrint)"
export AWS_PROFILE=procfail
load_fails "credential_process exits 1" "credential_process ($DIR/config \[procfail\]): credential_process exited with status 1: no credentials for two words"

# --- role_arn + credential_source (botocore's canonical names) ---------------
# The role's AssumeRole is signed with the keys the named source hands out
# (credserver.py's S3RVER keys and session token, the signature checked
# against botocore's).
creds_clear
cred_start --verify-secret S3RVER
export AWS_ENDPOINT_URL_STS=$CRED_URL AWS_CONFIG_FILE=$DIR/config
cat >"$DIR/config" <<EOF
[profile ecs]
role_arn = arn:aws:iam::123456789012:role/from-ecs
credential_source = EcsContainer
[profile ec2]
role_arn = arn:aws:iam::123456789012:role/from-ec2
credential_source = Ec2InstanceMetadata
[profile envsrc]
role_arn = arn:aws:iam::123456789012:role/from-env
credential_source = Environment
[profile bogus]
role_arn = arn:aws:iam::123456789012:role/bogus
credential_source = ec2instancemetadata
[profile both]
role_arn = arn:aws:iam::123456789012:role/both
credential_source = Environment
source_profile = ecs
EOF
export AWS_PROFILE=ecs AWS_CONTAINER_CREDENTIALS_FULL_URI=$CRED_URL/container/creds
load_ok "credential_source EcsContainer"
has "$DIR/cred.log" "^GET /container/creds " "EcsContainer: the container endpoint asked"
has "$DIR/cred.log" "Action=AssumeRole RoleArn=arn:aws:iam::123456789012:role/from-ecs .*Credential=S3RVER/[0-9]*/us-east-1/sts/aws4_request" "EcsContainer: AssumeRole signed with the container's keys"
boto_same "credential_source EcsContainer" "assume-role $SRV"
unset AWS_CONTAINER_CREDENTIALS_FULL_URI
load_fails "credential_source EcsContainer, no container" "$DIR/config: \[ecs\] credential_source EcsContainer: no credentials found there"
boto_same "credential_source EcsContainer, no container" "error CredentialRetrievalError"
export AWS_PROFILE=ec2 AWS_EC2_METADATA_SERVICE_ENDPOINT=$CRED_URL
unset AWS_EC2_METADATA_DISABLED
: >"$DIR/cred.log"
load_ok "credential_source Ec2InstanceMetadata"
has "$DIR/cred.log" "^PUT /latest/api/token ttl=21600" "Ec2InstanceMetadata: IMDSv2's token"
has "$DIR/cred.log" "Action=AssumeRole RoleArn=arn:aws:iam::123456789012:role/from-ec2 .*Credential=S3RVER/" "Ec2InstanceMetadata: AssumeRole signed with the instance's keys"
boto_same "credential_source Ec2InstanceMetadata" "assume-role $SRV"
export AWS_EC2_METADATA_DISABLED=true
load_fails "credential_source Ec2InstanceMetadata, IMDS off" "\[ec2\] credential_source Ec2InstanceMetadata: no credentials found there"
# Environment: keys in the environment come first in the chain (botocore's
# too), so the role is reached only without them: an error, not anonymous.
export AWS_PROFILE=envsrc
load_fails "credential_source Environment, no keys" "\[envsrc\] credential_source Environment: no credentials found there"
boto_same "credential_source Environment, no keys" "error CredentialRetrievalError"
export AWS_PROFILE=bogus
load_fails "credential_source unknown" "\[bogus\] credential_source is not Environment, EcsContainer or Ec2InstanceMetadata"
boto_same "credential_source unknown" "error InvalidConfigError"
export AWS_PROFILE=both
load_fails "credential_source and source_profile" "\[both\] has role_arn but both source_profile and credential_source"
boto_same "credential_source and source_profile" "error InvalidConfigError"

# --- SSO (IAM Identity Center): the AWS CLI's cached token --------------------
# GetRoleCredentials at AWS_ENDPOINT_URL_SSO (credserver.py) with the token
# `aws sso login` cached in ~/.aws/sso/cache/SHA1(session name or start
# URL).json; an expired token, one the portal refuses (401), a missing
# cache and a half SSO profile are errors saying what to do; never the token.
creds_clear
sso_start() { cred_start "$@"; export AWS_ENDPOINT_URL_SSO=$CRED_URL; }
sso_start
OLD_HOME=$HOME
export HOME=$DIR/home AWS_CONFIG_FILE=$DIR/config
mkdir -p "$HOME/.aws/sso/cache"
sha1() { printf %s "$1" | sha1sum | cut -d' ' -f1; }
SSO_URL=https://pinio-test.awsapps.com/start
sso_cache() {  # sso_cache KEY TOKEN EXPIRES-AT
    printf '{"startUrl": "%s", "region": "us-east-1", "accessToken": "%s", "expiresAt": "%s", "clientId": "x"}\n' \
        "$SSO_URL" "$2" "$3" >"$HOME/.aws/sso/cache/$(sha1 "$1").json"
}
cat >"$DIR/config" <<EOF
[profile sso]
sso_session = pinio-sso
sso_account_id = 123456789012
sso_role_name = ReadModels
[sso-session pinio-sso]
sso_start_url = $SSO_URL
sso_region = us-east-1
[profile ssolegacy]
sso_start_url = $SSO_URL
sso_region = eu-west-1
sso_account_id = 210987654321
sso_role_name = Legacy
[profile ssohalf]
sso_account_id = 123456789012
sso_role_name = ReadModels
[profile ssoclash]
sso_session = pinio-sso
sso_region = us-west-2
sso_account_id = 123456789012
sso_role_name = ReadModels
EOF
sso_cache pinio-sso pinio-sso-access-NeverPrint 2099-01-01T00:00:00Z
export AWS_PROFILE=sso
load_ok "SSO session"
has "$DIR/cred.log" "^GET /federation/credentials?role_name=ReadModels&account_id=123456789012 .*sso=ok" "SSO: GetRoleCredentials with the cached token"
boto_same "SSO session" "sso $SRV"
check 0 "doctor, SSO" "$PINIO" doctor "$URL"
has "$DIR/out" "^credentials  SSO ($DIR/config \[sso\] sso_session pinio-sso, role ReadModels in account 123456789012)$" "doctor: the SSO source"
no_secret "doctor, SSO"
export AWS_PROFILE=ssolegacy
sso_cache "$SSO_URL" pinio-sso-access-NeverPrint 2099-01-01T00:00:00UTC
load_ok "SSO legacy start URL"
has "$DIR/cred.log" "^GET /federation/credentials?role_name=Legacy&account_id=210987654321 .*sso=ok" "SSO legacy: the start URL's cached token"
boto_same "SSO legacy start URL" "sso $SRV"
export AWS_PROFILE=sso
sso_start --expire-in 300
load_ok "SSO, expiring credentials"
n=$(log_count /federation/credentials)
[ "$n" -ge 2 ] || { echo "FAIL: expiring SSO credentials fetched $n times, want a refresh"; fails=$((fails + 1)); }
sso_start --malformed
load_fails "SSO, malformed answer" "SSO ($DIR/config \[sso\] sso_session pinio-sso, role ReadModels in account 123456789012): a malformed answer from GetRoleCredentials (no accessKeyId, secretAccessKey and sessionToken strings)"
sso_start
sso_cache pinio-sso pinio-sso-access-NeverPrint 2020-01-01T00:00:00Z
load_fails "SSO, expired token" "SSO ($DIR/config \[sso\] sso_session pinio-sso, role ReadModels in account 123456789012): the SSO token cached in $HOME/.aws/sso/cache/$(sha1 pinio-sso).json expired at 2020-01-01T00:00:00Z: run \`aws sso login\`"
boto_same "SSO, expired token" "error TokenRetrievalError"
[ -s "$DIR/cred.log" ] && { echo "FAIL: an expired SSO token was sent:"; cat "$DIR/cred.log"; fails=$((fails + 1)); }
sso_cache pinio-sso wrong-NeverPrint 2099-01-01T00:00:00Z
load_fails "SSO, token refused" "GetRoleCredentials answered HTTP 401: the SSO session has expired or is not valid: run \`aws sso login\`"
boto_same "SSO, token refused" "error UnauthorizedSSOTokenError"
rm -f "$HOME/.aws/sso/cache/$(sha1 pinio-sso).json"
load_fails "SSO, no cached token" "no cached SSO token $HOME/.aws/sso/cache/$(sha1 pinio-sso).json: run \`aws sso login\`"
export AWS_PROFILE=ssohalf
load_fails "SSO, half a profile" "\[ssohalf\] is configured for SSO but has no sso_start_url, sso_region"
boto_same "SSO, half a profile" "error InvalidConfigError"
export AWS_PROFILE=ssoclash
load_fails "SSO, profile and session differ" "\[ssoclash\] sso_region differs from \[sso-session pinio-sso\]'s"
boto_same "SSO, profile and session differ" "error InvalidConfigError"
export HOME=$OLD_HOME
unset AWS_ENDPOINT_URL_SSO

# --- the container endpoint -------------------------------------------------
creds_clear
printf 'container-auth-NeverPrint\n' >"$DIR/auth.token"
cred_start --container-auth container-auth-NeverPrint
export AWS_CONTAINER_CREDENTIALS_FULL_URI=$CRED_URL/container/creds
export AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=$DIR/auth.token
load_ok "container, token file"
has "$DIR/cred.log" "GET /container/creds .*auth=ok" "the token file's token sent"
unset AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE
export AWS_CONTAINER_AUTHORIZATION_TOKEN=container-auth-NeverPrint
load_ok "container, token"
boto_same "container" "container-role $SRV"
export AWS_CONTAINER_AUTHORIZATION_TOKEN=wrong-NeverPrint
load_fails "container, wrong token" "container credentials (AWS_CONTAINER_CREDENTIALS_FULL_URI=$CRED_URL/container/creds): the endpoint answered HTTP 401"
export AWS_CONTAINER_CREDENTIALS_FULL_URI=http://192.0.2.1/creds
load_fails "container, a host not allowed" "an http:// URI must name 169.254.170.2, 169.254.170.23"

# --- IMDSv2 ---------------------------------------------------------------
creds_clear
unset AWS_EC2_METADATA_DISABLED
cred_start
export AWS_EC2_METADATA_SERVICE_ENDPOINT=$CRED_URL
load_ok "IMDSv2"
has "$DIR/cred.log" "PUT /latest/api/token ttl=21600" "the token PUT with its TTL"
has "$DIR/cred.log" "GET /latest/meta-data/iam/security-credentials/pinio-test-role token=ok" "the credentials read with the token"
boto_same "IMDSv2" "iam-role $SRV"
# Nothing listening: anonymous at once (s3rver serves anonymous requests).
cred_stop
load_ok "no IMDS"
check 0 "doctor, anonymous" "$PINIO" doctor "$URL"
has "$DIR/out" "^credentials  none: anonymous (unsigned requests)$" "doctor: anonymous said"
boto_same "no IMDS" "none"
# A metadata endpoint that never answers: one try (1 s), then anonymous.
cred_start --hang
export AWS_EC2_METADATA_SERVICE_ENDPOINT=$CRED_URL
load_ok "IMDS that never answers"
[ "$(wc -l <"$DIR/cred.log")" -eq 1 ] || { echo "FAIL: a silent IMDS: want one request:"; cat "$DIR/cred.log"; fails=$((fails + 1)); }
cred_stop

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
