/**
 * Secrets: the SST-managed API pepper, and the SSM Parameter Store prefix under which the
 * per-backend secrets named in backend configs (`sshKeySecret`, `tokenSecret`) live.
 *
 * Backend secrets are created by operators, not by this app, one SecureString per name:
 *   aws ssm put-parameter --type SecureString --name /swarmplane/<stage>/secrets/<project>/<name> --value ...
 * Names are scoped by project: a backend config of one project can only name that project's secrets.
 * The functions that read them (those that reach a backend's system: the API and the schedule
 * consumer, which runs every pass) receive the prefix as `SWARMPLANE_SECRETS_PREFIX` and read-only access
 * to the parameters under it; `functions/deps.ts` resolves names at runtime.
 */

/** HMAC pepper for API key hashes. Set with `sst secret set ApiPepper <value> --stage <stage>`. */
export const pepper = new sst.Secret("ApiPepper")

/**
 * SSM path of backend secrets, `/swarmplane/<stage>/secrets` (no trailing slash, the same
 * form as the default in `functions/deps.ts`); secret `<name>` of project `<p>` is `<prefix>/<p>/<name>`.
 */
export const secretsPrefix = `/swarmplane/${$app.stage}/secrets`

const region = aws.getRegionOutput().region
const account = aws.getCallerIdentityOutput().accountId
const { partition, dnsSuffix } = aws.getPartitionOutput()
/** Every parameter under the prefix (a parameter's ARN is `parameter` followed by its name). */
const parametersArn = $interpolate`arn:${partition}:ssm:${region}:${account}:parameter${secretsPrefix}/*`

/**
 * IAM statements of a function that reads backend secrets: `ssm:GetParameter` (the only SSM call
 * `packages/core/src/secrets/ssm.ts` makes; the wiring test reads it from there) on the parameters
 * under the prefix, nothing else. SecureStrings encrypted with the default `aws/ssm` key need no
 * extra grant (its key policy allows every principal in the account); the `kms:Decrypt` statement,
 * limited to calls made through SSM, lets an operator switch to a customer managed key whose policy
 * delegates to IAM without redeploying code.
 */
export const secretsPermissions = [
  {
    actions: ["ssm:GetParameter"],
    resources: [parametersArn],
  },
  {
    actions: ["kms:Decrypt"],
    resources: [$interpolate`arn:${partition}:kms:${region}:${account}:key/*`],
    conditions: [
      {
        test: "StringEquals",
        variable: "kms:ViaService",
        values: [$interpolate`ssm.${region}.${dnsSuffix}`],
      },
    ],
  },
]

/** Environment of a function that reads backend secrets; `functions/deps.ts` is the only reader. */
export const secretsEnvironment = {
  SWARMPLANE_STAGE: $app.stage,
  SWARMPLANE_SECRETS_PREFIX: secretsPrefix,
}
