package assess

// Content recovery of secret templates (issue 40's battery: a PIN, a date, a name hidden in a
// prompt) is not in the battery yet: baselines/content's recover reads encoder stores, and its
// extension to decoders (the candidate secret's rows from the decoder's forward at the attacked
// block) is being built beside this package. This is where it joins.
//
// The hook, in order:
//
//   - The deployment: a `secrets` section (templates such as "my PIN is {pin4}", the candidate
//     set of each slot, victims per template) beside `prompts`, with its rules in Rules and its
//     keys in Example; the victims are prompts like the others, so batches, shards, resume and
//     merge need nothing new.
//   - The attack: a value of type Attack named contentName, placed after presence in battery().
//     Run draws the batch's U at the attacked blocks with drawBatch (the sampler, call salts and
//     deployer rows every attack shares) and hands U and the model to recover's decoder path.
//   - The rows: Success = the victim's secret recovered exactly; Claimed = a claim that is the
//     victim's secret; WrongClaims = a claim of any other candidate, and a claim for a victim
//     whose secret is absent from the candidates (recover's -absent); CannotTell = "ranked first,
//     not claimed" (a claim is a proof, issue 36; a rank is reported, never claimed).
//     Candidates and Rank (1: the secret first) give the ranking's chance level like the learned
//     attack's, and the reports count them with no change.
//
// Until then a deployment that lists it is refused, saying so (Validate).

// contentName is content recovery's name in attacker.attacks, reserved for the hook above.
const contentName = "content"
