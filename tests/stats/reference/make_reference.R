# Independent reference values for tunelab.stats, computed with R.
#
# Regenerate (from the repository root):
#     Rscript tests/stats/reference/make_reference.R
# Needs: R >= 4.2 with the Debian packages r-cran-car, r-cran-emmeans, r-cran-jsonlite and r-cran-rstatix.
# Writes tests/stats/reference/datasets/*.csv (the data, exported from R's `datasets` package) and
# tests/stats/reference/reference.json (the values; numbers with 15 significant digits).
#
# Conventions shared with tunelab.stats:
# * group levels are sorted in C-locale order (what Python's sorted() does), so the pair
#   (group1, group2) has group1 before group2 and estimate = mean(group2) - mean(group1);
# * every table is a JSON array of row objects.

suppressPackageStartupMessages({
  library(car)
  library(emmeans)
  library(jsonlite)
  library(rstatix)
})

args <- commandArgs(trailingOnly = FALSE)
script <- sub("^--file=", "", args[grep("^--file=", args)])
here <- if (length(script)) dirname(normalizePath(script)) else "tests/stats/reference"
source(file.path(here, "dunn_formula.R"))
source(file.path(here, "games_howell_formula.R"))
dir.create(file.path(here, "datasets"), showWarnings = FALSE)

c_sorted_factor <- function(x) {
  x <- as.character(x)
  factor(x, levels = sort(unique(x), method = "radix"))
}

# ---------------------------------------------------------------- datasets -----------------------
data_sets <- list(
  PlantGrowth = PlantGrowth,
  InsectSprays = InsectSprays,
  warpbreaks = warpbreaks,
  ToothGrowth = ToothGrowth
)
# Unbalanced versions (fixed rows removed) so Tukey-Kramer and Type I/II/III sums of squares differ.
data_sets$InsectSprays_unbalanced <- InsectSprays[-c(1, 2, 13, 25, 26, 27, 40), ]
data_sets$warpbreaks_unbalanced <- warpbreaks[-c(1, 2, 3, 10, 30, 41), ]
data_sets$ToothGrowth_unbalanced <- ToothGrowth[-c(1, 2, 11, 12, 13, 31, 45), ]
for (name in names(data_sets)) {
  write.csv(data_sets[[name]], file.path(here, "datasets", paste0(name, ".csv")), row.names = FALSE)
}

# ---------------------------------------------------------------- one-way analyses ---------------
oneway_reference <- function(dataset, dv, between) {
  d <- data_sets[[dataset]]
  y <- d[[dv]]
  g <- c_sorted_factor(d[[between]])
  k <- nlevels(g)
  fit <- aov(y ~ g)
  tab <- summary(fit)[[1]]
  ss_b <- tab[1, "Sum Sq"]; ss_w <- tab[2, "Sum Sq"]; df_b <- tab[1, "Df"]; df_w <- tab[2, "Df"]
  ms_w <- ss_w / df_w

  welch <- oneway.test(y ~ g, var.equal = FALSE)
  kw <- kruskal.test(y ~ g)
  lev_mean <- leveneTest(y ~ g, center = mean)
  lev_median <- leveneTest(y ~ g, center = median)
  sw <- shapiro.test(residuals(fit))

  tk <- TukeyHSD(fit, conf.level = 0.95)$g
  lev <- levels(g)
  pairs <- do.call(rbind, lapply(rownames(tk), function(r) {
    parts <- strsplit(r, "-", fixed = TRUE)[[1]]          # "group2-group1"
    data.frame(group1 = parts[2], group2 = parts[1])
  }))
  pooled <- pairwise.t.test(y, g, pool.sd = TRUE, p.adjust.method = "none")$p.value
  tukey <- data.frame(pairs, estimate = tk[, "diff"], ci_low = tk[, "lwr"], ci_high = tk[, "upr"],
                      p = mapply(function(a, b) pooled[b, a], pairs$group1, pairs$group2),
                      p_adj = tk[, "p adj"], row.names = NULL)

  gh <- games_howell_formula(y, g)
  gh_rstatix <- as.data.frame(games_howell_test(data.frame(y = y, g = g), y ~ g, detailed = TRUE))
  stopifnot(isTRUE(all.equal(gh$estimate, gh_rstatix$estimate, tolerance = 1e-12)),
            isTRUE(all.equal(gh$ci_low, gh_rstatix$conf.low, tolerance = 1e-12)),
            max(abs(gh$p_adj - gh_rstatix$p.adj)) <= 0.0005 + 1e-12)   # rstatix rounds to 3 digits
  welch_p <- mapply(function(a, b) t.test(y[g == b], y[g == a], var.equal = FALSE)$p.value,
                    gh$group1, gh$group2)
  stopifnot(isTRUE(all.equal(gh$p, unname(welch_p), tolerance = 1e-12)))

  dunn_tables <- list()
  for (method in c("none", "bonferroni", "holm", "BH")) {
    mine <- dunn_formula(y, g, method)
    theirs <- as.data.frame(dunn_test(data.frame(y = y, g = g), y ~ g, p.adjust.method = method,
                                      detailed = TRUE))
    stopifnot(identical(mine$group1, theirs$group1), identical(mine$group2, theirs$group2),
              isTRUE(all.equal(mine$estimate, theirs$estimate, tolerance = 1e-12)),
              isTRUE(all.equal(mine$statistic, theirs$statistic, tolerance = 1e-12)),
              isTRUE(all.equal(mine$p, theirs$p, tolerance = 1e-12)),
              isTRUE(all.equal(mine$p_adj, theirs$p.adj, tolerance = 1e-12)))
    dunn_tables[[method]] <- mine
  }

  summ <- do.call(rbind, lapply(lev, function(l) {
    v <- y[g == l]
    data.frame(group = l, n = length(v), mean = mean(v), sd = sd(v), median = median(v),
               iqr = IQR(v), cv = sd(v) / mean(v))
  }))

  list(
    dataset = dataset, dv = dv, between = between, levels = lev,
    anova = list(call = sprintf("summary(aov(%s ~ %s, data = %s))", dv, between, dataset),
                 ss = c(ss_b, ss_w), df = c(df_b, df_w), ms = c(ss_b / df_b, ms_w),
                 F = tab[1, "F value"], p = tab[1, "Pr(>F)"],
                 eta2 = ss_b / (ss_b + ss_w), omega2 = (ss_b - df_b * ms_w) / (ss_b + ss_w + ms_w)),
    welch = list(call = sprintf("oneway.test(%s ~ %s, data = %s, var.equal = FALSE)", dv, between, dataset),
                 F = unname(welch$statistic), df1 = unname(welch$parameter[1]),
                 df2 = unname(welch$parameter[2]), p = welch$p.value),
    kruskal = list(call = sprintf("kruskal.test(%s ~ %s, data = %s)", dv, between, dataset),
                   H = unname(kw$statistic), df = unname(kw$parameter), p = kw$p.value,
                   epsilon2 = unname(kw$statistic) / (length(y) - 1)),
    levene = list(call = sprintf("car::leveneTest(%s ~ %s, data = %s, center = mean)", dv, between, dataset),
                  F = lev_mean[1, "F value"], df1 = lev_mean[1, "Df"], df2 = lev_mean[2, "Df"],
                  p = lev_mean[1, "Pr(>F)"]),
    brown_forsythe = list(call = sprintf("car::leveneTest(%s ~ %s, data = %s, center = median)", dv, between,
                                         dataset),
                          F = lev_median[1, "F value"], df1 = lev_median[1, "Df"], df2 = lev_median[2, "Df"],
                          p = lev_median[1, "Pr(>F)"]),
    shapiro = list(call = sprintf("shapiro.test(residuals(aov(%s ~ %s, data = %s)))", dv, between, dataset),
                   W = unname(sw$statistic), p = sw$p.value, n = length(y)),
    tukey = list(call = sprintf(paste0("TukeyHSD(aov(%s ~ %s, data = %s)); p: pairwise.t.test(pool.sd = TRUE, ",
                                       "p.adjust.method = 'none')"), dv, between, dataset),
                 rows = tukey),
    games_howell = list(call = paste0("games_howell_formula() in games_howell_formula.R (ptukey/qtukey), ",
                                      "checked against rstatix::games_howell_test; p: t.test(var.equal = FALSE)"),
                        rows = gh),
    dunn = list(call = paste0("dunn_formula(y, g, method) in dunn_formula.R, identical (1e-12) to ",
                              "rstatix::dunn_test(p.adjust.method = method)"),
                rows = dunn_tables),
    group_summary = list(call = "n, mean, sd, median, IQR (type 7), sd / mean per group", rows = summ)
  )
}

oneway <- list(
  PlantGrowth = oneway_reference("PlantGrowth", "weight", "group"),
  InsectSprays = oneway_reference("InsectSprays", "count", "spray"),
  InsectSprays_unbalanced = oneway_reference("InsectSprays_unbalanced", "count", "spray"),
  warpbreaks = oneway_reference("warpbreaks", "breaks", "tension"),
  ToothGrowth = oneway_reference("ToothGrowth", "len", "supp")
)

# ---------------------------------------------------------------- factorial ANOVA ----------------
anova_rows <- function(tab) {
  tab <- as.data.frame(tab)
  source <- trimws(rownames(tab))
  keep <- source != "(Intercept)"
  source <- ifelse(source == "Residuals", "Residual", source)
  data.frame(source = source[keep], ss = tab[keep, "Sum Sq"], df = tab[keep, "Df"],
             F = tab[keep, "F value"], p = tab[keep, "Pr(>F)"], row.names = NULL)
}

factorial_reference <- function(dataset, dv, factors, interactions = TRUE) {
  d <- data_sets[[dataset]]
  for (f in factors) d[[f]] <- c_sorted_factor(d[[f]])
  rhs <- paste(factors, collapse = if (interactions) " * " else " + ")
  form <- as.formula(paste(dv, "~", rhs))
  fit <- lm(form, data = d)
  old <- options(contrasts = c("contr.sum", "contr.poly"))
  fit_sum <- lm(form, data = d)
  options(old)
  out <- list(dataset = dataset, dv = dv, factors = factors, interactions = interactions,
              type1 = list(call = sprintf("anova(lm(%s ~ %s, data = %s))", dv, rhs, dataset),
                           rows = anova_rows(anova(fit))),
              type2 = list(call = sprintf("car::Anova(lm(%s ~ %s, data = %s), type = 2)", dv, rhs, dataset),
                           rows = anova_rows(Anova(fit, type = 2))),
              type3 = list(call = sprintf(paste0("options(contrasts = c('contr.sum', 'contr.poly')); ",
                                                 "car::Anova(lm(%s ~ %s, data = %s), type = 3)"),
                                          dv, rhs, dataset),
                           rows = anova_rows(Anova(fit_sum, type = 3))))
  for (t in c("type1", "type2", "type3")) {
    rows <- out[[t]]$rows
    ss_res <- rows$ss[rows$source == "Residual"]
    out[[t]]$rows$partial_eta2 <- ifelse(rows$source == "Residual", NA, rows$ss / (rows$ss + ss_res))
  }
  out
}

factorial <- list(
  warpbreaks = factorial_reference("warpbreaks", "breaks", c("wool", "tension")),
  warpbreaks_unbalanced = factorial_reference("warpbreaks_unbalanced", "breaks", c("wool", "tension")),
  warpbreaks_unbalanced_additive = factorial_reference("warpbreaks_unbalanced", "breaks", c("wool", "tension"),
                                                       interactions = FALSE),
  ToothGrowth = factorial_reference("ToothGrowth", "len", c("supp", "dose")),
  ToothGrowth_unbalanced = factorial_reference("ToothGrowth_unbalanced", "len", c("supp", "dose"))
)

# ---------------------------------------------------------------- effect sizes -------------------
# Cohen's d with the pooled SD; Hedges' g = d (1 - 3 / (4 (n1 + n2) - 9)) (Hedges & Olkin 1985,
# eq. 5.10 approximation; also effsize::cohen.d and pingouin); CI for g:
# g -/+ qt(0.975, n1 + n2 - 2) sqrt((n1 + n2) / (n1 n2) + g^2 / (2 (n1 + n2))).
cohen_reference <- function(dataset, dv, between, group1, group2) {
  d <- data_sets[[dataset]]
  x1 <- d[[dv]][as.character(d[[between]]) == group1]
  x2 <- d[[dv]][as.character(d[[between]]) == group2]
  n1 <- length(x1); n2 <- length(x2)
  sp <- sqrt(((n1 - 1) * var(x1) + (n2 - 1) * var(x2)) / (n1 + n2 - 2))
  dd <- (mean(x2) - mean(x1)) / sp
  gg <- dd * (1 - 3 / (4 * (n1 + n2) - 9))
  half <- qt(0.975, n1 + n2 - 2) * sqrt((n1 + n2) / (n1 * n2) + gg^2 / (2 * (n1 + n2)))
  data.frame(dataset = dataset, dv = dv, between = between, group1 = group1, group2 = group2,
             d = dd, g = gg, ci_low = gg - half, ci_high = gg + half)
}
cohen <- rbind(
  cohen_reference("PlantGrowth", "weight", "group", "ctrl", "trt1"),
  cohen_reference("PlantGrowth", "weight", "group", "ctrl", "trt2"),
  cohen_reference("ToothGrowth", "len", "supp", "OJ", "VC"),
  cohen_reference("InsectSprays_unbalanced", "count", "spray", "A", "C")
)

# ---------------------------------------------------------------- TOST ---------------------------
# Two one-sided Welch t-tests of mean(level) - mean(baseline) against -/+ margin,
# margin = sesoi_pct / 100 * |mean(baseline)|.
tost_reference <- function(dataset, dv, between, level, baseline, sesoi_pct) {
  d <- data_sets[[dataset]]
  x <- d[[dv]][as.character(d[[between]]) == level]
  b <- d[[dv]][as.character(d[[between]]) == baseline]
  margin <- sesoi_pct / 100 * abs(mean(b))
  lower <- t.test(x, b, alternative = "greater", mu = -margin, var.equal = FALSE)
  upper <- t.test(x, b, alternative = "less", mu = margin, var.equal = FALSE)
  p <- max(lower$p.value, upper$p.value)
  data.frame(dataset = dataset, dv = dv, between = between, level = level, baseline = baseline,
             sesoi_pct = sesoi_pct, pct_change = 100 * (mean(x) / mean(b) - 1),
             lower_bound = -margin, upper_bound = margin,
             p_lower = lower$p.value, p_upper = upper$p.value, p = p, equivalent = p < 0.05)
}
tost <- rbind(
  tost_reference("PlantGrowth", "weight", "group", "trt1", "ctrl", 20),
  tost_reference("PlantGrowth", "weight", "group", "trt1", "ctrl", 5),
  tost_reference("PlantGrowth", "weight", "group", "trt2", "ctrl", 15),
  tost_reference("PlantGrowth", "weight", "group", "trt2", "ctrl", 30),
  tost_reference("ToothGrowth", "len", "supp", "VC", "OJ", 30),
  tost_reference("warpbreaks", "breaks", "tension", "M", "L", 40)
)

# ---------------------------------------------------------------- power --------------------------
# Two groups: power.t.test(strict = TRUE) counts both tails like statsmodels TTestIndPower.
# k > 2 groups, least favourable configuration for a largest difference delta (two means at
# -/+ delta/2, the others in the middle): between.var = var(means) = delta^2 / (2 (k - 1)).
sample_size <- function(sd, mean, pct, k) {
  delta <- abs(pct / 100 * mean)
  n <- if (k == 2) {
    power.t.test(delta = delta, sd = sd, sig.level = 0.05, power = 0.8, strict = TRUE)$n
  } else {
    power.anova.test(groups = k, between.var = delta^2 / (2 * (k - 1)), within.var = sd^2,
                     sig.level = 0.05, power = 0.8)$n
  }
  data.frame(pilot_sd = sd, baseline_mean = mean, pct_change = pct, n_groups = k, n_exact = n,
             n_needed = max(2, ceiling(n)))
}
power_n <- rbind(sample_size(10, 100, 10, 2), sample_size(5, 200, 5, 2), sample_size(4, 100, 3, 2),
                 sample_size(10, 100, 10, 3), sample_size(3, 50, 10, 3), sample_size(10, 100, 10, 5),
                 sample_size(2, 100, 1, 4))

achieved <- function(dataset, dv, between, pct) {
  d <- data_sets[[dataset]]
  g <- c_sorted_factor(d[[between]])
  k <- nlevels(g)
  sd_pooled <- sqrt(summary(aov(d[[dv]] ~ g))[[1]][2, "Mean Sq"])
  n_min <- min(table(g))
  delta <- abs(pct / 100 * mean(d[[dv]]))
  pw <- if (k == 2) {
    power.t.test(n = n_min, delta = delta, sd = sd_pooled, sig.level = 0.05, strict = TRUE)$power
  } else {
    power.anova.test(groups = k, n = n_min, between.var = delta^2 / (2 * (k - 1)),
                     within.var = sd_pooled^2, sig.level = 0.05)$power
  }
  data.frame(dataset = dataset, dv = dv, between = between, pct_change = pct, n_per_group = n_min,
             effect_size = delta / sd_pooled, power = pw)
}
power_achieved <- rbind(achieved("PlantGrowth", "weight", "group", 20),
                        achieved("ToothGrowth", "len", "supp", 20),
                        achieved("InsectSprays_unbalanced", "count", "spray", 50))

# ---------------------------------------------------------------- multiplicity -------------------
p_raw <- c(0.01, 0.04, 0.03, 0.2, 0.0001, 0.049, 0.5, 0.012)
multiplicity <- list(p = p_raw,
                     holm = p.adjust(p_raw, "holm"), bonferroni = p.adjust(p_raw, "bonferroni"),
                     fdr_bh = p.adjust(p_raw, "BH"))

# ---------------------------------------------------------------- Lenth's PSE --------------------
# Montgomery, Design and Analysis of Experiments (8th ed.), Example 6.2: filtration rate of a
# chemical, unreplicated 2^4 (A temperature, B pressure, C formaldehyde concentration, D stirring
# rate), runs in standard order. Montgomery's Table 6.11 effect estimates are
# A 21.625, B 3.125, C 9.875, D 14.625, AB 0.125, AC -18.125, AD 16.625, BC 2.375, BD -0.375,
# CD -1.125, ABC 1.875, ABD 4.125, ACD -1.625, BCD -2.625, ABCD 1.375; the active effects
# are A, C, D, AC and AD.
filtration <- expand.grid(A = c(-1, 1), B = c(-1, 1), C = c(-1, 1), D = c(-1, 1))
filtration$rate <- c(45, 71, 48, 65, 68, 60, 80, 65, 43, 100, 45, 104, 75, 86, 70, 96)
write.csv(filtration, file.path(here, "datasets", "filtration_rate.csv"), row.names = FALSE)
fit <- lm(rate ~ A * B * C * D, data = filtration)
effect <- 2 * coef(fit)[-1]
m <- length(effect)
s0 <- 1.5 * median(abs(effect))
pse <- 1.5 * median(abs(effect)[abs(effect) < 2.5 * s0])
me <- qt(0.975, m / 3) * pse
sme <- qt((1 + 0.95^(1 / m)) / 2, m / 3) * pse
lenth <- list(source = "Montgomery (2013) Design and Analysis of Experiments, 8th ed., Example 6.2",
              call = "2 * coef(lm(rate ~ A * B * C * D)); Lenth (1989) s0, PSE, ME, SME by formula",
              rows = data.frame(term = names(effect), effect = unname(effect), pse = pse,
                                t = unname(effect) / pse, significant_me = abs(unname(effect)) > me,
                                significant_sme = abs(unname(effect)) > sme),
              s0 = s0, pse = pse, me = me, sme = sme, d = m / 3)

# ---------------------------------------------------------------- linear model (one fit) --------
# One lm per case with sum-to-zero coding, the way tunelab.stats.linear_model.fit_model fits it:
#   response (or log(response)) ~ [block +] main effects + the listed two-factor interactions.
# Tables: car::Anova type II and III (F tests; partial eta2 = SS / (SS + SS_residual)), the same
# with the HC3 covariance (Wald F), emmeans EMMs and EMM contrasts of every level against the
# baseline level (marginal: averaged over the other factors with equal weights; simple effects:
# within each level of an interacting factor), unadjusted and Dunnett-adjusted.
#
# Dunnett: the adjustment over the contrasts of one family (one knob, one `at`) uses the
# multivariate t with the correlations of the model's contrast estimates (cov2cor(vcov(contrast))),
# p_adj = P(max |T_i| >= |t|) and adj CI = estimate -/+ q SE with P(max |T_i| <= q) = 0.95. It is
# computed here to ~1e-10 (families of at most two contrasts: inclusion-exclusion over the events
# |T_i| >= t, bivariate t orthant probabilities by a one-dimensional integral; q by uniroot) and
# checked against emmeans' own `adjust = "mvt"` (randomised Genz-Bretz, abseps 1e-3, under set.seed)
# to 2e-3. NB emmeans has no adjust = "dunnett": an unknown name silently falls back to "dunnettx"
# (the default for trt.vs.ctrl), an approximation that ignores the actual correlations of
# unbalanced data (off by up to 3e-3 in the CIs of warpbreaks_unbalanced).
data_sets$npk <- npk[, c("block", "N", "P", "K", "yield")]
write.csv(data_sets$npk, file.path(here, "datasets", "npk.csv"), row.names = FALSE)

orthant_t2 <- function(t, df, rho) {              # P(T1 <= -t, T2 <= -t), bivariate t(df, rho)
  # T2 | T1 = x is t(df + 1) with location rho x and scale sqrt((df + x^2) (1 - rho^2) / (df + 1)):
  # a one-dimensional integral, accurate in relative terms also far in the tail.
  f <- function(x) dt(x, df) * pt((-t - rho * x) / sqrt((df + x^2) * (1 - rho^2) / (df + 1)), df + 1)
  integrate(f, -Inf, -t, rel.tol = 1e-13, abs.tol = 0)$value
}
max_abs_t_sf <- function(t, df, corr) {          # P(max_i |T_i| >= t), T ~ multivariate t(df, corr)
  k <- nrow(corr)                                  # inclusion-exclusion over the events |T_i| >= t
  stopifnot(k <= 2)
  if (k == 1) return(2 * pt(-t, df))
  4 * pt(-t, df) - 2 * (orthant_t2(t, df, corr[1, 2]) + orthant_t2(t, df, -corr[1, 2]))
}
dunnett <- function(t, se, estimate, df, corr, level = 0.95) {
  q <- uniroot(function(x) max_abs_t_sf(x, df, corr) - (1 - level), c(1, 10), tol = 1e-13)$root
  list(p_adj = sapply(abs(t), max_abs_t_sf, df = df, corr = corr),
       adj_ci_low = estimate - q * se, adj_ci_high = estimate + q * se, q = q)
}

model_reference <- function(dataset, dv, factors, baseline, pairs = list(), block = NULL, log = FALSE) {
  d <- data_sets[[dataset]]
  for (f in c(block, factors)) d[[f]] <- c_sorted_factor(d[[f]])
  lhs <- if (log) sprintf("log(%s)", dv) else dv
  rhs <- paste(c(block, factors, vapply(pairs, paste, "", collapse = ":")), collapse = " + ")
  form <- as.formula(paste(lhs, "~", rhs))
  fit <- lm(form, data = d, contrasts = setNames(rep(list("contr.sum"), length(c(block, factors))),
                                                 c(block, factors)))
  fit_call <- sprintf("fit <- lm(%s ~ %s, data = %s, contrasts = contr.sum for every factor)",
                      lhs, rhs, dataset)

  with_eta <- function(rows) {
    ss_res <- rows$ss[rows$source == "Residual"]
    rows$partial_eta2 <- ifelse(rows$source == "Residual", NA, rows$ss / (rows$ss + ss_res))
    rows
  }
  wald_rows <- function(tab) {
    tab <- as.data.frame(tab)
    source <- trimws(rownames(tab))
    keep <- !(source %in% c("(Intercept)", "Residuals"))
    data.frame(source = source[keep], df1 = tab[keep, "Df"], df2 = df.residual(fit),
               F = tab[keep, "F"], p = tab[keep, "Pr(>F)"], row.names = NULL)
  }
  hc3 <- list()
  for (type in 2:3) {
    hc3[[type - 1]] <- suppressMessages(Anova(fit, type = type, white.adjust = "hc3"))
  }
  # car's HC3 type II Wald test does not depend on the coding: check with treatment contrasts
  fit_treatment <- lm(form, data = d)
  stopifnot(isTRUE(all.equal(hc3[[1]][["F"]],
                             suppressMessages(Anova(fit_treatment, type = 2, white.adjust = "hc3"))[["F"]],
                             tolerance = 1e-10)))

  contrast_rows <- list(); emm_rows <- list(); calls <- character()
  add_family <- function(knob, other = NULL, with_emm = TRUE) {
    spec <- if (is.null(other)) as.formula(paste("~", knob)) else as.formula(paste("~", knob, "|", other))
    ref <- match(as.character(baseline[[knob]]), levels(d[[knob]]))
    emm <- suppressMessages(emmeans(fit, spec))
    ct <- contrast(emm, "trt.vs.ctrl", ref = ref)
    s <- as.data.frame(summary(ct, infer = c(TRUE, TRUE), adjust = "none"))
    set.seed(20240501)
    s_mvt <- as.data.frame(summary(ct, infer = c(TRUE, TRUE), adjust = "mvt"))
    V <- vcov(ct)
    lev <- levels(d[[knob]])[-ref]
    at_levels <- if (is.null(other)) "" else levels(d[[other]])
    out <- list()
    for (a in at_levels) {
      i <- if (is.null(other)) seq_len(nrow(s)) else which(as.character(s[[other]]) == a)
      stopifnot(length(i) == length(lev),
                all(mapply(function(l, lab) startsWith(lab, paste0(l, " - ")) ||
                             startsWith(lab, paste0(knob, l, " - ")), lev, as.character(s$contrast[i]))))
      adj <- dunnett(s$t.ratio[i], s$SE[i], s$estimate[i], s$df[i][1], cov2cor(V[i, i, drop = FALSE]))
      stopifnot(max(abs(adj$p_adj - s_mvt$p.value[i])) <= 2e-3,
                max(abs(adj$adj_ci_low - s_mvt$lower.CL[i])) <= 2e-3,
                max(abs(adj$adj_ci_high - s_mvt$upper.CL[i])) <= 2e-3)
      out[[length(out) + 1]] <- data.frame(
        knob = knob, level = lev, baseline = as.character(baseline[[knob]]),
        at = if (is.null(other)) "" else paste0(other, "=", a),
        estimate = s$estimate[i], se = s$SE[i], df = s$df[i], t = s$t.ratio[i], p = s$p.value[i],
        ci_low = s$lower.CL[i], ci_high = s$upper.CL[i],
        p_adj = adj$p_adj, adj_ci_low = adj$adj_ci_low, adj_ci_high = adj$adj_ci_high)
    }
    contrast_rows[[length(contrast_rows) + 1]] <<- do.call(rbind, out)
    calls <<- c(calls, sprintf(paste0("contrast(emmeans(fit, %s), 'trt.vs.ctrl', ref = %d) # baseline %s; ",
                                      "summary(adjust = 'none', infer = TRUE); Dunnett by formula above, ",
                                      "= summary(adjust = 'mvt') to 2e-3"),
                               deparse(spec), ref, baseline[[knob]]))
    e <- as.data.frame(summary(emm))
    if (with_emm) {
      emm_rows[[length(emm_rows) + 1]] <<- data.frame(
        knob = knob, level = as.character(e[[knob]]), by = if (is.null(other)) NA else other,
        by_level = if (is.null(other)) NA else as.character(e[[other]]),
        mean = e$emmean, se = e$SE, df = e$df, ci_low = e$lower.CL, ci_high = e$upper.CL)
    }
  }
  for (f in factors) add_family(f)
  for (pr in pairs) {      # term a:b: simple effects a | b and b | a; EMMs only a | b (as fit.emmeans)
    add_family(pr[1], pr[2])
    add_family(pr[2], pr[1], with_emm = FALSE)
  }

  list(dataset = dataset, dv = dv, factors = factors, block = if (is.null(block)) NA else block, log = log,
       interactions = pairs, baseline = baseline,
       residual_df = df.residual(fit), call = fit_call,
       type2 = list(call = "car::Anova(fit, type = 2)", rows = with_eta(anova_rows(Anova(fit, type = 2)))),
       type3 = list(call = "car::Anova(fit, type = 3)", rows = with_eta(anova_rows(Anova(fit, type = 3)))),
       hc3_type2 = list(call = "car::Anova(fit, type = 2, white.adjust = 'hc3')", rows = wald_rows(hc3[[1]])),
       hc3_type3 = list(call = "car::Anova(fit, type = 3, white.adjust = 'hc3')", rows = wald_rows(hc3[[2]])),
       contrasts = list(call = calls, rows = do.call(rbind, contrast_rows)),
       emmeans = list(call = "emmeans(fit, ~ knob) and, for each term a:b, emmeans(fit, ~ a | b); summary()",
                      rows = do.call(rbind, emm_rows)))
}

model <- list(
  npk = model_reference("npk", "yield", c("N", "P", "K"), list(N = "0", P = "0", K = "0"),
                        pairs = list(c("N", "P"), c("N", "K"), c("P", "K")), block = "block"),
  warpbreaks = model_reference("warpbreaks", "breaks", c("wool", "tension"), list(wool = "A", tension = "L"),
                               pairs = list(c("wool", "tension")), log = TRUE),
  warpbreaks_unbalanced = model_reference("warpbreaks_unbalanced", "breaks", c("wool", "tension"),
                                          list(wool = "A", tension = "L"),
                                          pairs = list(c("wool", "tension")), log = TRUE),
  ToothGrowth = model_reference("ToothGrowth", "len", c("supp", "dose"), list(supp = "OJ", dose = "0.5"),
                                pairs = list(c("supp", "dose")))
)
# Venables & Ripley (2002) MASS, 4th ed., section 6.7, and R's ?npk: the half-fractions in the
# blocks confound N:P:K with blocks, so aov drops it and the residual has 12 df. With the blocks
# orthogonal to every main effect and two-factor interaction, these sequential SS equal type II.
npk_aov <- summary(aov(yield ~ block + N * P * K, data = npk))[[1]]
model$npk$source <- paste0("Venables, W. N. and Ripley, B. D. (2002) Modern Applied Statistics with S, ",
                           "4th ed., Springer, section 6.7; R datasets::npk help page")
model$npk$aov <- list(call = "summary(aov(yield ~ block + N * P * K, data = npk))",
                      rows = anova_rows(npk_aov)[, c("source", "df", "ss", "F", "p")])
stopifnot(identical(model$npk$aov$rows$source,
                    c("block", "N", "P", "K", "N:P", "N:K", "P:K", "Residual")),
          model$npk$residual_df == 12,
          isTRUE(all.equal(model$npk$aov$rows$ss, model$npk$type2$rows$ss, tolerance = 1e-10)))

# ---------------------------------------------------------------- write --------------------------
reference <- list(
  generated_by = "tests/stats/reference/make_reference.R",
  r_version = R.version.string,
  packages = list(car = as.character(packageVersion("car")),
                  rstatix = as.character(packageVersion("rstatix")),
                  jsonlite = as.character(packageVersion("jsonlite")),
                  emmeans = as.character(packageVersion("emmeans")),
                  mvtnorm = as.character(packageVersion("mvtnorm"))),
  oneway = oneway, factorial = factorial, cohens_d = cohen, tost = tost,
  replicates_needed = power_n, achieved_power = power_achieved, multiplicity = multiplicity,
  lenth = lenth, model = model
)
write_json(reference, file.path(here, "reference.json"), digits = I(15), auto_unbox = TRUE,
           pretty = TRUE, na = "null")
cat("wrote", file.path(here, "reference.json"), "\n")
