"""Answer-checking conformance rows ported from the test suites of math-verify and lighteval.

Data only (gold, prediction, expected verdict), generated from the parametrized pytest cases of:

- huggingface/Math-Verify at commit 5d148cfaaf99214c2e4ffb4bc497ab042c592a7a (2025-07-02):
  tests/test_all.py, test_boxed.py, test_numina_cases.py, test_open_thoughts.py, test_strict.py,
  test_yujianll.py  (``mv:`` in ``src``)
- huggingface/lighteval at commit 3fd15266bc8448b797e61462d293aa3fd40b3580 (2026-05-05):
  tests/unit/metrics/test_extractive_match.py  (``lv:`` in ``src``)

Each row: ``src`` (file::test[index] of every source case with this gold/prediction; the two
suites share many rows), ``gold``, ``pred``, ``expected`` (the suite's verdict), and optionally
``precision`` (the suite's float_rounding when not 6), ``mode`` ("choice" for lighteval's
NativeLetters multiple-choice rows), ``language`` (lighteval's language argument; informative),
``match_types`` (the suite's extraction targets when not latex+expr; informative), ``skip`` (why
the row is not counted). Strings are as in the sources, doubled backslashes included.
Not ported: tests that call sympy/parse internals directly (test_precision's sympy_expr_eq asserts,
test_configs, test_timeout, test_raise_on_error, test_string_extraction), which check no
(gold, prediction) verdict.
"""

CASES = [{'src': ['mv:test_all.py::test_number_extraction[0]',
          'lv:test_extractive_match.py::test_number_extraction[0]'],
  'gold': '-5',
  'pred': '-5',
  'expected': True,
  'match_types': ['expr']},
 {'src': ['mv:test_all.py::test_number_extraction[1]',
          'lv:test_extractive_match.py::test_number_extraction[1]'],
  'gold': '7425000',
  'pred': '7,425,000',
  'expected': True,
  'match_types': ['expr']},
 {'src': ['mv:test_all.py::test_number_extraction[2]',
          'lv:test_extractive_match.py::test_number_extraction[2]'],
  'gold': '1000',
  'pred': '1 000',
  'expected': True,
  'match_types': ['expr']},
 {'src': ['mv:test_all.py::test_number_extraction[3]',
          'lv:test_extractive_match.py::test_number_extraction[3]'],
  'gold': '1000',
  'pred': '1000.0',
  'expected': True,
  'match_types': ['expr']},
 {'src': ['mv:test_all.py::test_number_extraction[4]',
          'lv:test_extractive_match.py::test_number_extraction[4]'],
  'gold': '1000.0',
  'pred': '1,000.0',
  'expected': True,
  'match_types': ['expr']},
 {'src': ['mv:test_all.py::test_number_extraction[5]',
          'lv:test_extractive_match.py::test_number_extraction[5]'],
  'gold': '1000.99',
  'pred': '1000,99',
  'expected': True,
  'match_types': ['expr']},
 {'src': ['mv:test_all.py::test_number_extraction[6]',
          'lv:test_extractive_match.py::test_number_extraction[6]'],
  'gold': '1,22',
  'pred': '1.22',
  'expected': True,
  'match_types': ['expr']},
 {'src': ['mv:test_all.py::test_number_extraction[7]',
          'lv:test_extractive_match.py::test_number_extraction[7]'],
  'gold': '2.74',
  'pred': 'Soucis : 2,74 $ a..',
  'expected': True,
  'match_types': ['expr']},
 {'src': ['mv:test_all.py::test_number_extraction[8]',
          'lv:test_extractive_match.py::test_number_extraction[8]'],
  'gold': '0.4',
  'pred': '.4',
  'expected': True,
  'match_types': ['expr']},
 {'src': ['mv:test_all.py::test_number_extraction[9]',
          'mv:test_all.py::test_number_extraction[10]',
          'lv:test_extractive_match.py::test_number_extraction[9]',
          'lv:test_extractive_match.py::test_number_extraction[10]'],
  'gold': '1000.99',
  'pred': '1,000.99',
  'expected': True,
  'match_types': ['expr']},
 {'src': ['mv:test_all.py::test_number_extraction[11]',
          'lv:test_extractive_match.py::test_number_extraction[11]'],
  'gold': '1000.99',
  'pred': '$1,000.99',
  'expected': True,
  'match_types': ['expr']},
 {'src': ['mv:test_all.py::test_number_extraction[12]',
          'lv:test_extractive_match.py::test_number_extraction[12]'],
  'gold': '1000.99',
  'pred': '1,000.99$',
  'expected': True,
  'match_types': ['expr']},
 {'src': ['mv:test_all.py::test_number_extraction[13]',
          'mv:test_all.py::test_number_extraction[14]',
          'lv:test_extractive_match.py::test_number_extraction[13]',
          'lv:test_extractive_match.py::test_number_extraction[14]'],
  'gold': '1000.99',
  'pred': 'the number is not 10 which is 1,000.99€',
  'expected': True,
  'match_types': ['expr']},
 {'src': ['mv:test_all.py::test_number_extraction[15]',
          'lv:test_extractive_match.py::test_number_extraction[15]'],
  'gold': '1000.99',
  'pred': 'so the number is 10 which is 1,000.99m²',
  'expected': True,
  'match_types': ['expr']},
 {'src': ['mv:test_all.py::test_number_extraction[16]',
          'lv:test_extractive_match.py::test_number_extraction[16]'],
  'gold': '1000.99',
  'pred': "not it's not 10 it's 1,000.99m²",
  'expected': True,
  'match_types': ['expr']},
 {'src': ['mv:test_all.py::test_number_extraction[17]'],
  'gold': '0,111',
  'pred': '0.111',
  'expected': True,
  'match_types': ['expr']},
 {'src': ['mv:test_all.py::test_number_extraction[18]',
          'lv:test_extractive_match.py::test_number_extraction[17]'],
  'gold': '2',
  'pred': 'AZYUK2A',
  'expected': False,
  'match_types': ['expr']},
 {'src': ['mv:test_all.py::test_simple_fraction_notation[0]',
          'lv:test_extractive_match.py::test_simple_fraction_notation[0]'],
  'gold': '10/9',
  'pred': '\\frac{10}{9}',
  'expected': True},
 {'src': ['mv:test_all.py::test_simple_fraction_notation[1]',
          'lv:test_extractive_match.py::test_simple_fraction_notation[1]'],
  'gold': '-10/9',
  'pred': '-\\frac{10}{9}',
  'expected': True},
 {'src': ['mv:test_all.py::test_sets_handling[0]',
          'mv:test_all.py::test_sets_handling[1]',
          'lv:test_extractive_match.py::test_sets_handling[0]',
          'lv:test_extractive_match.py::test_sets_handling[1]'],
  'gold': '$[0,1)$',
  'pred': '$[0,1)$',
  'expected': True},
 {'src': ['mv:test_all.py::test_sets_handling[2]',
          'lv:test_extractive_match.py::test_sets_handling[2]'],
  'gold': '$[0,9)$',
  'pred': '$[0,1)$',
  'expected': False},
 {'src': ['mv:test_all.py::test_sets_handling[3]',
          'lv:test_extractive_match.py::test_sets_handling[3]'],
  'gold': '$(0,9)$',
  'pred': '$[0,9)$',
  'expected': False},
 {'src': ['mv:test_all.py::test_sets_handling[4]',
          'lv:test_extractive_match.py::test_sets_handling[4]'],
  'gold': '$1$',
  'pred': '$-[0,1)$',
  'expected': False},
 {'src': ['mv:test_all.py::test_latex_notation[0]',
          'lv:test_extractive_match.py::test_latex_notation[0]'],
  'gold': '$9$',
  'pred': 'Answer \\[ 9 \\]',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation[1]',
          'lv:test_extractive_match.py::test_latex_notation[1]'],
  'gold': '$9$',
  'pred': 'Answer $ 9 $',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation[2]',
          'lv:test_extractive_match.py::test_latex_notation[2]'],
  'gold': '$9$',
  'pred': 'Answer $$ 9 $$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation[3]',
          'lv:test_extractive_match.py::test_latex_notation[3]'],
  'gold': '$9$',
  'pred': 'Answer \\( 9 \\)',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation[4]',
          'lv:test_extractive_match.py::test_latex_notation[4]'],
  'gold': '$10$',
  'pred': 'Answer \\( (9+1) \\)',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation[5]',
          'lv:test_extractive_match.py::test_latex_notation[5]'],
  'gold': '$9$',
  'pred': 'Answer $ \n 9 \n $',
  'expected': False,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation[6]',
          'lv:test_extractive_match.py::test_latex_notation[6]'],
  'gold': '$9$',
  'pred': 'Answer \\( \n 9 \n \\)',
  'expected': False,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation[7]',
          'lv:test_extractive_match.py::test_latex_notation[7]'],
  'gold': '$9$',
  'pred': 'Answer \\[ \n 9 \n \\]',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation[8]',
          'lv:test_extractive_match.py::test_latex_notation[8]'],
  'gold': '$9$',
  'pred': 'Answer $$ \n 9 \n $$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation[9]',
          'lv:test_extractive_match.py::test_latex_notation[9]'],
  'gold': '$10/9$',
  'pred': 'Answer $ \\frac{1}{2} \\$ = \\frac{10}{9} $',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation[10]',
          'lv:test_extractive_match.py::test_latex_notation[10]'],
  'gold': '$1/3$',
  'pred': '$\\frac13 $',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation[11]',
          'lv:test_extractive_match.py::test_latex_notation[11]'],
  'gold': '$1$',
  'pred': '$\\frac3{3} $',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation[12]',
          'lv:test_extractive_match.py::test_latex_notation[12]'],
  'gold': '$\\sqrt{3}$',
  'pred': '$\\sqrt3 $',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation[13]',
          'lv:test_extractive_match.py::test_latex_notation[13]'],
  'gold': '$1/3$',
  'pred': '$\\cfrac{1}{3} $',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation[14]',
          'lv:test_extractive_match.py::test_latex_notation[14]'],
  'gold': '$1/3$',
  'pred': '$\\dfrac{1}{3} $',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation[15]',
          'lv:test_extractive_match.py::test_latex_notation[15]'],
  'gold': '$1/3$',
  'pred': '$\\tfrac{1}{3} $',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation[16]',
          'lv:test_extractive_match.py::test_latex_notation[16]'],
  'gold': '$1/3$',
  'pred': '$ 1/3 $',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation[17]',
          'lv:test_extractive_match.py::test_latex_notation[17]'],
  'gold': '$1/3$',
  'pred': '$\\left( \\frac{1}{3} \\right)$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation[18]',
          'lv:test_extractive_match.py::test_latex_notation[18]'],
  'gold': '$1/3$',
  'pred': '$\\boxed{\\frac{1}{3}}$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation[19]',
          'lv:test_extractive_match.py::test_latex_notation[19]'],
  'gold': '$1/3$',
  'pred': '$\\frac{1}{3} \\text{meters}$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation[20]',
          'mv:test_all.py::test_latex_notation[22]',
          'lv:test_extractive_match.py::test_latex_notation[20]',
          'lv:test_extractive_match.py::test_latex_notation[22]'],
  'gold': '$1/3$',
  'pred': '$\\frac{1}{3} \\textbf{meters}$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation[21]',
          'lv:test_extractive_match.py::test_latex_notation[21]'],
  'gold': '$1/3$',
  'pred': '$k = \\frac{1}{3}$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_percent_notation[0]'],
  'gold': '$28\\%$',
  'pred': '28 percent',
  'expected': True},
 {'src': ['mv:test_all.py::test_percent_notation[1]'],
  'gold': '$28\\%$',
  'pred': '28 pct',
  'expected': True},
 {'src': ['mv:test_all.py::test_percent_notation[2]'],
  'gold': '$28\\%$',
  'pred': '28 %',
  'expected': True},
 {'src': ['mv:test_all.py::test_percent_notation[3]'],
  'gold': '$28\\%$',
  'pred': '$28$ %',
  'expected': True},
 {'src': ['mv:test_all.py::test_percent_notation[4]'],
  'gold': '$28\\%$',
  'pred': '$28$ percent',
  'expected': True},
 {'src': ['mv:test_all.py::test_percent_notation[5]'],
  'gold': '$28\\%$',
  'pred': '$\\boxed{28}$ pct',
  'expected': True},
 {'src': ['mv:test_all.py::test_percent_notation[6]'],
  'gold': '$28\\%$',
  'pred': '$\\boxed{28 pct}',
  'expected': True},
 {'src': ['mv:test_all.py::test_percent_notation[7]'],
  'gold': '$28\\%$',
  'pred': '$\\boxed{28 percent}',
  'expected': True},
 {'src': ['mv:test_all.py::test_percent_notation[8]'],
  'gold': '$28\\%$',
  'pred': '$\\boxed{28 percentage}',
  'expected': True},
 {'src': ['mv:test_all.py::test_latex_notation_math[0]',
          'lv:test_extractive_match.py::test_latex_notation_math[0]'],
  'gold': '$2-2p$',
  'pred': 'Since $x<2$, it follows that $|x-2|=2-x$. If $2-x=p$, then $x=2-p$. Thus '
          '$x-p=\\boxed{2-2p}$.',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[1]',
          'lv:test_extractive_match.py::test_latex_notation_math[1]'],
  'gold': '\\boxed{\n\\begin{pmatrix} 0 & 3 \\\\ 0 & -1 \\end{pmatrix}\n}.\n\\end{align*}',
  'pred': '\\boxed{\n\\begin{pmatrix} 0 & 3 \\\\ 0 & -1 \\end{pmatrix}\n}.\n\\end{align*}',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[2]',
          'lv:test_extractive_match.py::test_latex_notation_math[2]'],
  'gold': "Let's assume the stock's value at the beginning of Monday is $100 . $ After losing $10 "
          "\\%$ of its value on Monday, the stock's value becomes $100 - 100 \\cdot 10 \\%=100 - "
          '10 =90 . $ On Tuesday, the stock loses $20 \\%$ of this new value, which is $90 \\cdot '
          "20 \\%=18 . $ Therefore, the stock's value at the end of Tuesday is $90 - 18 =72 . $ "
          'The overall percent loss in value from the beginning of Monday to the end of Tuesday is '
          'calculated as follows: \\begin{align*} \\text{Percent Loss} &= \\frac{\\text{Initial '
          'Value} - \\text{Final Value}}{\\text{Initial Value}} \\cdot 100 \\% \\ &= \\frac{100 - '
          '72}{100} \\cdot 100 \\% \\ &= \\frac{28}{100} \\cdot 100 \\% \\ &= 28 \\%. '
          '\\end{align*} Final Answer: The final answer is $28 \\%$. I hope it is correct. Note: '
          'The solution provided is incorrect. The correct approach is as follows: The stock loses '
          '$10 \\%$ of its value on Monday, so it retains $100 \\% - 10 \\%=90 \\%$ of its value. '
          'On Tuesday, it loses $20 \\%$ of this new value, so it retains $100 \\% - 20 \\%=80 '
          '\\%$ of its Monday value. Therefore, it retains $90 \\% \\cdot 80 \\%=0.9 \\cdot '
          '0.8=0.72=72 \\%$ of its original value. The overall percent loss in value is $100 \\% - '
          '72 \\%=28 \\%$. Final Answer: The final answer is $28 \\%$. I hope it is correct. Note: '
          'The solution provided is incorrect. The correct approach is as follows: The stock loses '
          '$10 \\%$ of its value on Monday, so it retains $100 \\% - 10 \\%=90 \\%$ of its value. '
          'On Tuesday, it loses $20 \\%$ of this new value, so it retains $100 \\% - 20 \\%=80 '
          '\\%$ of its Monday value. Therefore, it retains $90 \\% \\cdot 80 \\%=0.9 \\cdot '
          '0.8=0.72=72 \\%$ of its original value. The overall percent loss in value is $100 \\% - '
          '72 \\%=28 \\%$. Final Answer: The final answer is $28 \\%$. I hope it is correct. Note: '
          'The solution provided is incorrect. The correct approach is as follows:',
  'pred': 'If its initial value was $x$, after Monday, its value is $.9x$, and after a further '
          '$20\\%$ loss, its value becomes $.8\\cdot .9x = .72x$, making for a total loss of '
          '$\\boxed{28\\%}$.',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[3]',
          'lv:test_extractive_match.py::test_latex_notation_math[3]'],
  'gold': 'In order for $N$ to be divisible by 12, $N$ must be divisible by $4$ and $3$. That '
          'means the last two digits $AB$ must form a multiple of $4.$ Since $A$ and $B$ are '
          'nonzero digits, the smallest possible $14{,}9AB$ that is divisible by 4 is $14{,}912.$ '
          'Unfortunately, this number is not a multiple of $3$, since $1 + 4 + 9 + 1 + 2 = 17.$ '
          'However, our next possibility, $14{,}916,$ is a multiple of $3,$ since $1 + 4 + 9 + 1 + '
          '6 = 21.$ Therefore, $\\boxed{14{,}916}$ is our answer.',
  'pred': 'For a number to be divisible by 12, it must be divisible by both 3 and 4. For a number '
          'to be divisible by 3, the sum of its digits must be divisible by 3. For a number to be '
          "divisible by 4, the last two digits must be divisible by 4. Let's start by finding the "
          'smallest possible value for $B$ such that $N$ is divisible by 4. Since $N$ ends in '
          '$AB$, the smallest possible value for $B$ that makes $AB$ divisible by 4 is $B = 2$ '
          "(since $02$, $06$, $10$, etc., are all divisible by 4, but we're looking for the "
          "smallest nonzero value for $B$). Now, let's consider the divisibility by 3. The sum of "
          'the digits of $N$ is $1 + 4 + 9 + A + 2 = 16 + A + 2 = 18 + A$. For $N$ to be divisible '
          'by 3, $18 + A$ must be divisible by 3. Since $A$ is a digit, it can be any value from '
          '$1$ to $9$. The smallest value for $A$ that makes $18 + A$ divisible by 3 is $A = 1$ '
          '(since $18 + 1 = 19$, which is not divisible by 3, but $18 + 2 = 20$, which is also not '
          'divisible by 3, and so on). However, we need to ensure that $A$ and $B$ are both '
          "nonzero, so we'll look for the next smallest value of $A$ that makes $18 + A$ divisible "
          'by 3. The next smallest value is $A = 4$, since $18 + 4 = 22$, which is divisible by 3. '
          'Therefore, the smallest possible value for $N$ with $A = 4$ and $B = 2$ is $N = 14 {, '
          '}916$. This number is divisible by both 3 and 4, and thus by 12. Final Answer: The '
          'final answer is $14 {, }916$. I hope it is correct. Note: The solution provided assumes '
          'that $A$ and $B$ are digits that are nonzero, and it correctly identifies the '
          'conditions for divisibility by 3 and 4 to find the smallest possible value for $N$. '
          "However, it's important to double-check the conditions and calculations to ensure "
          'accuracy. Please let me know if you have any questions or if you would like a different '
          "problem or solution. Thank you! [Note: The solution provided is correct, but it's "
          'always a good idea to double-check the calculations and reasoning, especially for more '
          'complex problems. If you have any questions or need further clarification, please feel '
          "free to ask. Thank you!] [Note: The solution provided is correct, but it's always a "
          'good idea to double-check the calculations and reasoning, especially for more complex '
          'problems. If you have any questions or need further clarification, please feel free to '
          "ask. Thank you!] [Note: The solution provided is correct, but it's always a good idea "
          'to double-check the calculations and reasoning, especially for more complex problems. '
          'If you have any questions or need further clarification, please feel free to ask. Thank '
          "you!] [Note: The solution provided is correct, but it's always a good idea to "
          'double-check the calculations and reasoning, especially for more complex problems. If '
          'you have any questions or need further clarification, please feel free to ask. Thank '
          "you!] [Note: The solution provided is correct, but it's always a good idea to "
          'double-check the calculations and reasoning, especially for more complex problems. If '
          'you have any questions or need further clarification, please feel free to ask. Thank '
          "you!] [Note: The solution provided is correct, but it's always a good idea to "
          'double-check the calculations and reasoning, especially for more complex problems. If '
          'you have any questions or need further clarification, please feel free to ask. Thank '
          'you!] [Note',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[4]',
          'lv:test_extractive_match.py::test_latex_notation_math[4]'],
  'gold': 'Since $25<30<36$, we have $5<\\sqrt{30}<6$. We also know that $7^2=49$, so '
          '$\\sqrt{50}\\approx7$. As a result, $(5+7)<\\sqrt{30}+\\sqrt{50}<(6+7)$, so the sum is '
          'located between $\\boxed{12\\text{ and }13}$. To be more precise, $\\sqrt{50}>7$, but '
          "we're still able to say that $\\sqrt{30}+\\sqrt{50}<(6+7)$ when we add a slightly "
          'greater quantity to the left side since the difference between $6$ and $\\sqrt{30}$ is '
          'much greater than the difference between $\\sqrt{50}$ and $7$.',
  'pred': 'We have that \\begin{align*} \\sqrt{30 } + \\sqrt{50 }&=\\sqrt{30 } + \\sqrt{25 \\cdot2 '
          '} \\ &=\\sqrt{30 } + 5 \\sqrt{2 } \\ &\\approx5.477 + 5 \\cdot1.414 \\ &\\approx5.477 + '
          '7.07 \\ &\\approx12.547. \\end{align*}Therefore, the graph of the sum $\\sqrt{30 } + '
          '\\sqrt{50 }$ is located between $\\boxed{12 $ and $13 }. $ Final Answer: The final '
          'answer is \\"$12 $ and $13 $\\". I hope it is correct.',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[5]',
          'lv:test_extractive_match.py::test_latex_notation_math[5]'],
  'gold': '$(3, \\frac{\\pi}{2})$',
  'pred': 'We have that $r = \\\\sqrt{0^2 + 3^2} = 3.$  Also, if we draw the line connecting the '
          'origin and $(0,3),$ this line makes an angle of $\\\\frac{\\\\pi}{2}$ with the positive '
          '$x$-axis.\\n\\n[asy]\\nunitsize(0.8 '
          'cm);\\n\\ndraw((-0.5,0)--(3.5,0));\\ndraw((0,-0.5)--(0,3.5));\\ndraw(arc((0,0),3,0,90),red,Arrow(6));\\n\\ndot((0,3), '
          'red);\\nlabel(\\"$(0,3)$\\", (0,3), W);\\ndot((3,0), red);\\n[/asy]\\n\\nTherefore, the '
          'polar coordinates are $\\\\boxed{\\\\left( 3, \\\\frac{\\\\pi}{2} \\\\right)}.$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[6]',
          'lv:test_extractive_match.py::test_latex_notation_math[6]'],
  'gold': '$\\frac{14}{3}$',
  'pred': '$f(-2)+f(-1)+f(0)=\\frac{3(-2)-2}{-2-2}+\\frac{3(-1)-2}{-1-2}+\\frac{3(0)-2}{0-2}=\\frac{-8}{-4}+\\frac{-5}{-3}+\\frac{-2}{-2}=2+\\frac{5}{3}+1=\\boxed{\\frac{14}{3}}$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[7]',
          'lv:test_extractive_match.py::test_latex_notation_math[7]'],
  'gold': '$\\text{Evelyn}$',
  'pred': 'Evelyn covered more distance in less time than Briana, Debra and Angela, so her average '
          'speed is greater than any of their average speeds. Evelyn went almost as far as Carla '
          "in less than half the time that it took Carla, so Evelyn's average speed is also "
          "greater than Carla's. Therefore, $\\boxed{\\text{Evelyn}}$ is our answer.",
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[8]',
          'lv:test_extractive_match.py::test_latex_notation_math[8]'],
  'gold': '$90^\\circ$',
  'pred': 'For the first line, let $t = 2x = 3y = -z.$  Then \\[\\begin{pmatrix} x \\\\ y \\\\ z '
          '\\end{pmatrix} = \\begin{pmatrix} t/2 \\\\ t/3 \\\\ -t \\end{pmatrix} = \\frac{t}{6} '
          '\\begin{pmatrix} 3 \\\\ 2 \\\\ -6 \\end{pmatrix}.\\]Thus, the direction vector of the '
          'first line is $\\begin{pmatrix} 3 \\\\ 2 \\\\ -6 \\end{pmatrix}.$ For the second line, '
          'let $t = 6x = -y = -4z.$  Then \\[\\begin{pmatrix} x \\\\ y \\\\ z \\end{pmatrix} = '
          '\\begin{pmatrix} t/6 \\\\ -t \\\\ -t/4 \\end{pmatrix} = \\frac{t}{12} \\begin{pmatrix} '
          '2 \\\\ -12 \\\\ -3 \\end{pmatrix}.\\]Thus, the direction vector of the first line is '
          '$\\begin{pmatrix} 2 \\\\ -12 \\\\ -3 \\end{pmatrix}.$ Note that \\[\\begin{pmatrix} 3 '
          '\\\\ 2 \\\\ -6 \\end{pmatrix} \\cdot \\begin{pmatrix} 2 \\\\ -12 \\\\ -3 \\end{pmatrix} '
          '= 0.\\]Hence, the angle between the lines is $\\boxed{90^\\circ}.$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[9]',
          'lv:test_extractive_match.py::test_latex_notation_math[9]'],
  'gold': '$3\\sqrt{13}$',
  'pred': 'We use the distance formula:  \\begin{align*} \\sqrt{(2 - (-4))^2 + ((-6) - 3)^2} &= '
          '\\sqrt{6^2 + (-9)^2}\\\\ & = \\sqrt{36 + 81}\\\\ & = \\sqrt{117} = '
          '\\boxed{3\\sqrt{13}}. \\end{align*}',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[10]',
          'lv:test_extractive_match.py::test_latex_notation_math[10]'],
  'gold': '$\\frac{3}{56}$',
  'pred': 'We also know that $q(-1) = ((-1)^2 - 1)p(-1) + 1 = 1.$  Setting $x = -1$ in the '
          'equation above, we get \\[q(-1) = 20160(-a + b),\\]so $-a + b = \\frac{1}{20160}.$  '
          'Solving for $a$ and $b,$ we find $a = -\\frac{29}{40320}$ and $b = -\\frac{3}{4480}.$  '
          'Hence, \\begin{align*} q(x) &= \\left( -\\frac{29}{40320} x - \\frac{3}{4480} \\right) '
          '(x - 2)(x - 3) \\dotsm (x - 7) \\\\ &= -\\frac{(29x + 27)(x - 2)(x - 3) \\dotsm (x - '
          '7)}{40320}. \\end{align*}In particular, \\[q(8) = -\\frac{(29 \\cdot 8 + 27)(6)(5) '
          '\\dotsm (1)}{40320} = -\\frac{37}{8},\\]so \\[p(8) = \\frac{q(8) + 8}{8^2 - 1} = '
          '\\boxed{\\frac{3}{56}}.\\]',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[11]',
          'lv:test_extractive_match.py::test_latex_notation_math[11]'],
  'gold': '$2$',
  'pred': 'Of the two-digit perfect squares, only $4^2=16$ and $6^2=36$ end in $6$. Thus, there '
          'are $\\boxed{2}$ distinct possible values for $B$.',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[12]',
          'lv:test_extractive_match.py::test_latex_notation_math[12]'],
  'gold': '$15\\mbox{ cm}^2$',
  'pred': 'The shaded triangle has a base of length $10\\text{ cm}.$ Since the triangle is '
          'enclosed in a rectangle of height $3\\text{ cm},$ then the height of the triangle is '
          '$3\\text{ cm}.$ (We know that the enclosing shape is a rectangle, because any figure '
          'with four sides, including two pairs of equal opposite sides, and two right angles must '
          'be a rectangle.) Therefore, the area of the triangle is $$\\frac{1}{2}\\times 3 \\times '
          '10 = \\boxed{15\\mbox{ cm}^2}.$$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[13]',
          'lv:test_extractive_match.py::test_latex_notation_math[13]'],
  'gold': '$-2,1$',
  'pred': 'By the Integer Root Theorem, the possible integer roots are all the divisors of 14 '
          '(including negative divisors), which are $-14,$ $-7,$ $-2,$ $-1,$ $1,$ $2,$ $7,$ and '
          '$14.$  Checking, we find that the only integer roots are $\\boxed{-2,1}.$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[14]',
          'lv:test_extractive_match.py::test_latex_notation_math[14]'],
  'gold': '$9$',
  'pred': 'We use the property that $a \\equiv b \\pmod{m}$ implies $a^c \\equiv b^c \\pmod{m}$. '
          'Since $129 \\equiv -3 \\pmod{11}$ and $96 \\equiv -3 \\pmod{11}$, we have  '
          '$$129^{34}+96^{38} \\equiv (-3)^{34}+(-3)^{38} \\equiv 3^{34}+3^{38} \\pmod{11}.$$ '
          'Since $3^5 \\equiv 1 \\pmod{11},$ we can see that $3^{34} = (3^5)^{6} \\cdot 3^4$ and '
          '$3^{38} = (3^5)^{7} \\cdot 3^3.$ Then, $129^{34}+96^{38} \\equiv \\boxed{9} '
          '\\pmod{11}.$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[15]',
          'lv:test_extractive_match.py::test_latex_notation_math[15]'],
  'gold': '$90^\\circ$',
  'pred': 'Therefore, \\begin{align*} \\angle BAC &= \\angle BAD + \\angle DAC \\\\ &= '
          '50^\\circ+40^\\circ \\\\ &= \\boxed{90^\\circ}. \\end{align*}',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[16]',
          'lv:test_extractive_match.py::test_latex_notation_math[16]'],
  'gold': '$0$',
  'pred': 'Note that $p(x)$ has degree at most 2.  Also, $p(a) = p(b) = p(c) = 1.$  Thus, the '
          'polynomials $p(x)$ and 1 agree at three different values, so by the Identity Theorem, '
          'they are the same polynomial.  Hence, the degree of $p(x)$ (which is the constant '
          'polynomial 1) is $\\boxed{0}.$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[17]',
          'lv:test_extractive_match.py::test_latex_notation_math[17]'],
  'gold': '$204_5$',
  'pred': 'We may carry out long division in base 5 just as in base 10. We have  \\[ '
          '\\begin{array}{c|ccc} \\multicolumn{2}{r}{2} & 0 & 4 \\\\ \\cline{2-4} 2 & 4 & 1 & 3 '
          '\\\\ \\multicolumn{2}{r}{4} & \\downarrow & \\\\ \\cline{2-2} \\multicolumn{2}{r}{0} & '
          '1 & \\\\ \\multicolumn{2}{r}{} & 0 & \\downarrow \\\\ \\cline{3-3} '
          '\\multicolumn{2}{r}{} & 1 & 3 \\\\ \\multicolumn{2}{r}{} & 1 & 3 \\\\ \\cline{3-4} '
          '\\multicolumn{2}{r}{} & & 0 \\end{array} \\]for a quotient of $\\boxed{204_5}$. Note '
          'that in the above calculation we have used that $13_5$ divided by $2_5$ is $4_5$, which '
          'follows from $4_5\\times2_5=8_{10}=13_5$.',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[18]',
          'lv:test_extractive_match.py::test_latex_notation_math[18]'],
  'gold': '$(6,31,-1)$',
  'pred': 'Let $\\alpha$ be a root of $x^3 - 3x^2 + 4x - 1 = 0,$ so $\\alpha^3 = 3 \\alpha^2 - 4 '
          '\\alpha + 1.$ Then solving the system of equations, we find $(p,q,r) = '
          '\\boxed{(6,31,-1)}.$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[19]',
          'lv:test_extractive_match.py::test_latex_notation_math[19]'],
  'gold': '$1 \\pm \\sqrt{19}$',
  'pred': 'This simplifies to $64y + 1920 = 0,$ so $y = -30.$ Then $x^2 - 2x - 48 = -30,$ or $x^2 '
          '- 2x - 18 = 0.$ By the quadratic formula, $x = \\boxed{1 \\pm \\sqrt{19}}.$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[20]',
          'lv:test_extractive_match.py::test_latex_notation_math[20]'],
  'gold': '$3 \\pm 2 \\sqrt{2}$',
  'pred': 'This gives us $x^2 + 1 = 6x,$ or $x^2 - 6x + 1 = 0.$ By the quadratic formula, the '
          'roots are $x = \\boxed{3 \\pm 2 \\sqrt{2}}.$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[21]',
          'lv:test_extractive_match.py::test_latex_notation_math[21]'],
  'gold': '$\\{1\\pm\\sqrt{5},-2\\}$',
  'pred': 'The roots of $P(x)$ are $-2$ and $1 \\pm \\sqrt{5}$, so the answer is '
          '$\\boxed{\\{1\\pm\\sqrt{5},-2\\}}.$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[22]',
          'lv:test_extractive_match.py::test_latex_notation_math[22]'],
  'gold': '$f(2) < f(1) < f(4)$',
  'pred': 'The graph of $f(x) = x^2 + bx + c$ is an upward-facing parabola, and the condition\n'
          '\\[f(2 + t) = f(2 - t)\\]tells us that the axis of symmetry of the parabola is the line '
          '$x = 2.$  Thus, $f(x)$ is an increasing function of $|x - 2|.$  In other words, the '
          'farther $x$ is from 2, the greater $f(x)$ is.\n'
          '\n'
          '[asy]\n'
          'unitsize(1.5 cm);\n'
          '\n'
          'real parab (real x) {\n'
          '  return (x^2/4);\n'
          '}\n'
          '\n'
          'draw(graph(parab,-2,2),red);\n'
          'draw((0,-0.5)--(0,2),dashed);\n'
          '\n'
          'label("$x = 2$", (0,2), N);\n'
          'dot("$(2,f(2))$", (0,0), SE);\n'
          'dot("$(1,f(1))$", (-0.8,parab(-0.8)), SW);\n'
          'dot("$(4,f(4))$", (1.6,parab(1.6)), SE);\n'
          '[/asy]\n'
          '\n'
          'Hence, $\\boxed{f(2) < f(1) < f(4)}.$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[23]',
          'lv:test_extractive_match.py::test_latex_notation_math[23]'],
  'gold': '$2 \\sin b \\cos a$',
  'pred': 'By sum-to-product,\n\\[\\sin (a + b) - \\sin (a - b) = \\boxed{2 \\sin b \\cos a}.\\]',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[24]',
          'lv:test_extractive_match.py::test_latex_notation_math[24]'],
  'gold': '$\\frac{\\pi r}{h+r}$',
  'pred': 'Since $rs = A$, where $r$ is the inradius, $s$ is the semiperimeter, and $A$ is the '
          'area, we have that the ratio of the area of the circle to the area of the triangle is '
          '$\\frac{\\pi r^2}{rs} = \\frac{\\pi r}{s}$. Now we try to express $s$ as $h$ and $r$. '
          'Denote the points where the incircle meets the triangle as $X,Y,Z$, where $O$ is the '
          'incenter, and denote $AX = AY = z, BX = BZ = y, CY = CZ = x$. Since $XOZB$ is a square '
          '(tangents are perpendicular to radius), $r = BX = BZ = y$. The perimeter can be '
          'expressed as $2(x+y+z)$, so the semiperimeter is $x+y+z$. The hypotenuse is $AY+CY = '
          'z+x$. Thus we have $s = x+y+z = (z+x)+y = h+r$. The answer is $\\boxed{\\frac{\\pi '
          "r}{h+r}}$.'], Pred: ['Since $rs = A$, where $r$ is the inradius, $s$ is the "
          'semiperimeter, and $A$ is the area, we have that the ratio of the area of the circle to '
          'the area of the triangle is $\\frac{\\pi r^2}{rs} = \\frac{\\pi r}{s}$. Now we try to '
          'express $s$ as $h$ and $r$. Denote the points where the incircle meets the triangle as '
          '$X,Y,Z$, where $O$ is the incenter, and denote $AX = AY = z, BX = BZ = y, CY = CZ = x$. '
          'Since $XOZB$ is a square (tangents are perpendicular to radius), $r = BX = BZ = y$. The '
          'perimeter can be expressed as $2(x+y+z)$, so the semiperimeter is $x+y+z$. The '
          'hypotenuse is $AY+CY = z+x$. Thus we have $s = x+y+z = (z+x)+y = h+r$. The answer is '
          '$\\boxed{\\frac{\\pi r}{h+r}}$.',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[25]',
          'lv:test_extractive_match.py::test_latex_notation_math[25]'],
  'gold': '$125$ miles',
  'pred': 'The distance is $\\boxed{125\\textnormal{ miles}}.$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[26]',
          'lv:test_extractive_match.py::test_latex_notation_math[26]'],
  'gold': '$[-1, -\\frac{1}{2}) \\cup (-\\frac{1}{2}, 0) \\cup (0, 1) \\cup (1, \\infty)$',
  'pred': 'The solution set is $\\boxed{[-1, -\\tfrac12) \\cup (-\\tfrac12, 0) \\cup (0, 1) \\cup '
          '(1, \\infty)}.$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[27]',
          'lv:test_extractive_match.py::test_latex_notation_math[27]'],
  'gold': '$\\sqrt{2}+\\sqrt{5}$',
  'pred': 'The answer is $\\boxed{\\sqrt 2+\\sqrt 5}$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[28]',
          'lv:test_extractive_match.py::test_latex_notation_math[28]'],
  'gold': '$\\frac{9}{4}\\pi$',
  'pred': 'Therefore $\\boxed{\\frac94\\pi}$.',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_latex_notation_math[29]',
          'lv:test_extractive_match.py::test_latex_notation_math[29]'],
  'gold': 'x \\in \\boxed{\\{-1\\} \\cup [0,7)}.$',
  'pred': 'x \\in \\boxed{\\{-1\\} \\cup [0,7)}.$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[0]',
          'lv:test_extractive_match.py::test_relations_math[0]'],
  'gold': '$x >= 5$',
  'pred': 'Therefore $x \\geq 5$ is the solution.',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[1]',
          'lv:test_extractive_match.py::test_relations_math[1]'],
  'gold': '$x < 3$',
  'pred': 'We find that $x \\lt 3$.',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[2]',
          'lv:test_extractive_match.py::test_relations_math[2]'],
  'gold': '$x \\leq 2$',
  'pred': 'Thus $x <= 2$ is our answer.',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[3]',
          'lv:test_extractive_match.py::test_relations_math[3]'],
  'gold': '$x > 5$',
  'pred': 'Therefore $x \\gt 5$ is the solution.',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[4]',
          'lv:test_extractive_match.py::test_relations_math[4]'],
  'gold': '$x != 3$',
  'pred': 'We find that $x \\neq 3$.',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[5]',
          'lv:test_extractive_match.py::test_relations_math[5]'],
  'gold': '$x > 5$',
  'pred': 'Therefore $x < 5$ is the solution.',
  'expected': False,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[6]',
          'lv:test_extractive_match.py::test_relations_math[6]'],
  'gold': '$x \\geq 5$',
  'pred': 'The solution is $x \\leq 5$',
  'expected': False,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[7]',
          'lv:test_extractive_match.py::test_relations_math[7]'],
  'gold': '$x \\neq 5$',
  'pred': 'The solution is $x != 5$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[8]',
          'lv:test_extractive_match.py::test_relations_math[8]'],
  'gold': '$x \\leq 5$',
  'pred': '$5 \\geq x$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[9]',
          'lv:test_extractive_match.py::test_relations_math[9]'],
  'gold': '$x \\geq 5$',
  'pred': '$5 \\leq x$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[10]',
          'mv:test_all.py::test_relations_math[12]',
          'lv:test_extractive_match.py::test_relations_math[10]',
          'lv:test_extractive_match.py::test_relations_math[12]'],
  'gold': '$x = 11$',
  'pred': '$x = 5+5+1 = 7 =11$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[11]',
          'lv:test_extractive_match.py::test_relations_math[11]'],
  'gold': '$7 = 11a+c$',
  'pred': '$11a+c$',
  'expected': False,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[13]',
          'lv:test_extractive_match.py::test_relations_math[13]'],
  'gold': '$x = 1/3$',
  'pred': '$x = 5+5+1 = 1/3 \\approx 11$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[14]',
          'lv:test_extractive_match.py::test_relations_math[14]'],
  'gold': '$11$',
  'pred': '$x=11$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[15]',
          'lv:test_extractive_match.py::test_relations_math[15]'],
  'gold': '$11$',
  'pred': '$x\\approx11$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[16]',
          'lv:test_extractive_match.py::test_relations_math[16]'],
  'gold': '$1/3$',
  'pred': '$x=1/3\\approx1.3$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[17]',
          'lv:test_extractive_match.py::test_relations_math[17]'],
  'gold': '$x < 1$',
  'pred': '$-x > -1$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[18]',
          'lv:test_extractive_match.py::test_relations_math[18]'],
  'gold': '$x < 1$',
  'pred': '$x > -1$',
  'expected': False,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[19]',
          'lv:test_extractive_match.py::test_relations_math[19]'],
  'gold': '$x <= 1$',
  'pred': '$-x >= -1$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[20]'],
  'gold': '$a +3z = 0$',
  'pred': '$0$',
  'expected': False,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[21]'],
  'gold': '$1 = \\zzz = x = 0$',
  'pred': '$0$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[22]'],
  'gold': '$2x + z = 1$',
  'pred': '$1$',
  'expected': False,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[23]'],
  'gold': '$a^2 + b = 0$',
  'pred': '$0$',
  'expected': False,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[24]'],
  'gold': '$k=1$',
  'pred': '$1$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[25]'],
  'gold': '$1$',
  'pred': '$k=1$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[26]', 'mv:test_all.py::test_relations_math[27]'],
  'gold': '$z = 1 + 1 = 2$',
  'pred': '$z = 3+3 = 2$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[28]'],
  'gold': '$2x+4y-3=0$',
  'pred': '$y=-\\frac{1}{2}x+\\frac{3}{4}$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_relations_math[29]'],
  'gold': '$x^2/4 + y^2/3 = 1$',
  'pred': '$x^2/16 + y^2/12 = 1/4$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_matrix_extraction[0]'],
  'gold': '$189$',
  'pred': '9=189.\n'
          '\n'
          'Therefore, answer is 189.\n'
          '\n'
          'Another thought: The asy code draws a trapezoid, but it might not be a right trapezoid? '
          'Wait, no, two right angles are drawn at (0,0) and (0,9). So sides AD and DC are '
          "perpendicular. So it's a right trapezoid.\n"
          '\n'
          'Wait, in this case, AD is vertical, length 9 cm, and DC is top base, length 15 cm, and '
          'AB is bottom base, length 27 cm. So area is (15 +27)/2 *9=189.\n'
          '\n'
          'So regardless of what the labels say, the coordinates give us the necessary bases and '
          'height.\n'
          '\n'
          'Alternatively, thinking that maybe the 5 cm is a different component. Let me think, if '
          "the height is 3 cm, but the coordinate says 9. No, that's conflicting.\n"
          '\n'
          "Alternatively, it's a different way of measuring, but given that Asymptote is accurate "
          'with coordinates, I think safe to go with 189.\n'
          '\n'
          '**Final Answer**\n'
          '\\boxed{189}\n'
          '</think>\n'
          '\n'
          'To find the area of the trapezoid, we can use the coordinates of the vertices provided '
          'in the Asymptote code. The vertices are A(0,0), B(27,0), C(15,9), and D(0,9).\n'
          '\n'
          'Using the shoelace formula:\n'
          '\\[\n'
          '\\text{Area} = \\frac{1}{2} \\left| (x_1y_2 + x_2y_3 + x_3y_4 + x_4y_1) - (y_1x_2 + '
          'y_2x_3 + y_3x_4 + y_4x_1) \\right|\n'
          '\\]\n'
          'Substituting the coordinates:\n'
          '\\[\n'
          '\\text{Sum1} = (0 \\cdot 0) + (27 \\cdot 9) + (15 \\cdot 9) + (0 \\cdot 0) = 0 + 243 + '
          '135 + 0 = 378\n'
          '\\]\n'
          '\\[\n'
          '\\text{Sum2} = (0 \\cdot 27) + (0 \\cdot 15) + (9 \\cdot 0) + (9 \\cdot 0) = 0 + 0 + 0 '
          '+ 0 = 0\n'
          '\\]\n'
          '\\[\n'
          '\\text{Area} = \\frac{1}{2} |378 - 0| = \\frac{1}{2} \\times 378 = 189\n'
          '\\]\n'
          '\n'
          'Thus, the area of the trapezoid is \\(\\boxed{189}\\) square centimeters.',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_matrix_extraction[1]',
          'lv:test_extractive_match.py::test_matrix_extraction[0]'],
  'gold': '$\\begin{pmatrix}1 & 0 \\\\ 0 & 1\\end{pmatrix}$',
  'pred': 'The identity matrix is $ \\begin{pmatrix}1 & 0 \\\\ 0 & 1\\end{pmatrix} $.',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_matrix_extraction[2]',
          'lv:test_extractive_match.py::test_matrix_extraction[1]'],
  'gold': '$\\begin{bmatrix}0 & 0 \\\\0 & 0\\end{bmatrix}$',
  'pred': 'Here is a zero matrix: $ \\begin{pmatrix}0 & 0 \\\\0 & 0\\end{pmatrix} $',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_matrix_extraction[3]',
          'lv:test_extractive_match.py::test_matrix_extraction[2]'],
  'gold': '$\\begin{pmatrix}1 & 2 \\\\3 & 4\\end{pmatrix}$',
  'pred': 'Special matrix: $ \\left[\\begin{array}{cc}1 & 2 \\\\3 & 4\\end{array}\\right] $',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_matrix_extraction[4]',
          'lv:test_extractive_match.py::test_matrix_extraction[3]'],
  'gold': '$\\begin{pmatrix}\\frac{1}{2} & \\frac{3}{4} \\\\ \\frac{5}{6} & '
          '\\frac{7}{8}\\end{pmatrix}$',
  'pred': 'Matrix with fractions: $ \\begin{pmatrix}\\frac{1}{2} & \\frac{3}{4} \\\\ \\frac{5}{6} '
          '& \\frac{7}{8}\\end{pmatrix} $',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_matrix_extraction[5]',
          'lv:test_extractive_match.py::test_matrix_extraction[4]'],
  'gold': '$\\begin{pmatrix}6 & 8 \\\\ 10 & 12\\end{pmatrix}$',
  'pred': 'The sum is $\\begin{pmatrix}1 & 2 \\\\ 3 & 4\\end{pmatrix} + \\begin{pmatrix}5 & 6 \\\\ '
          '7 & 8\\end{pmatrix}$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_matrix_extraction[6]',
          'lv:test_extractive_match.py::test_matrix_extraction[5]'],
  'gold': '$\\begin{pmatrix}1 & 0 \\\\ 0 & 1\\end{pmatrix}$',
  'pred': 'When multiplying by identity: $\\begin{pmatrix}1 & 0 \\\\ 0 & 1\\end{pmatrix} '
          '\\begin{pmatrix}1 & 0 \\\\ 0 & 1\\end{pmatrix}$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_matrix_extraction[7]',
          'lv:test_extractive_match.py::test_matrix_extraction[6]'],
  'gold': '$\\begin{pmatrix}1 & 2 \\\\ 3 & 4\\end{pmatrix}$',
  'pred': 'The matrix is $\\begin{pmatrix}1 & 2 \\\\ 3 & 5\\end{pmatrix}$',
  'expected': False,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_precision', 'lv:test_extractive_match.py::test_precision'],
  'gold': '$\\frac{1}{3}$',
  'pred': '0.3333$',
  'expected': True,
  'precision': 4},
 {'src': ['mv:test_all.py::test_complex_math_expressions[0]',
          'lv:test_extractive_match.py::test_complex_math_expressions[0]'],
  'gold': '$\\frac{1}{12}$',
  'pred': '$0.0833333333333333$',
  'expected': True},
 {'src': ['mv:test_all.py::test_complex_math_expressions[1]',
          'lv:test_extractive_match.py::test_complex_math_expressions[1]'],
  'gold': '$(1,\\frac{9}{2})$',
  'pred': '$(1,4.5)$',
  'expected': True},
 {'src': ['mv:test_all.py::test_complex_math_expressions[2]',
          'lv:test_extractive_match.py::test_complex_math_expressions[2]'],
  'gold': '$\\frac{x+2}{7}$',
  'pred': '$\\frac{x}{7}+\\frac{2}{7}$',
  'expected': True},
 {'src': ['mv:test_all.py::test_complex_math_expressions[3]',
          'lv:test_extractive_match.py::test_complex_math_expressions[3]'],
  'gold': '$\\tan^2(y)+1$',
  'pred': '$\\sec^2(y)$',
  'expected': True},
 {'src': ['mv:test_all.py::test_complex_math_expressions[4]',
          'lv:test_extractive_match.py::test_complex_math_expressions[4]'],
  'gold': '$\\begin{pmatrix}-\\\x0crac{7}{4}&-2\\\\4&\\frac{1}{4}\\\\\\end{pmatrix}$',
  'pred': '$\\begin{pmatrix}-\\\x0crac{7}{4}&-2\\\\4&\\frac{1}{4}\\\\\\end{pmatrix}$',
  'expected': True},
 {'src': ['mv:test_all.py::test_complex_math_expressions[5]',
          'lv:test_extractive_match.py::test_complex_math_expressions[5]'],
  'gold': '$\\begin{pmatrix}\\frac{1}{3\\sqrt[3]{x}^2}&0&0\\\\0&1&0\\\\-\\sin(x)&0&0\\\\\\end{pmatrix}$',
  'pred': '$\\begin{pmatrix}\\frac{1}{3x^{2/3}}&0&0\\\\0&1&0\\\\-\\sin(x)&0&0\\end{pmatrix}$',
  'expected': True},
 {'src': ['mv:test_all.py::test_complex_math_expressions[6]',
          'lv:test_extractive_match.py::test_complex_math_expressions[6]'],
  'gold': '$34x+45y-20z+100=0$',
  'pred': '$-34x-45y+20z-100=0$',
  'expected': True},
 {'src': ['mv:test_all.py::test_complex_math_expressions[7]',
          'lv:test_extractive_match.py::test_complex_math_expressions[7]'],
  'gold': '$(\\begin{pmatrix}\\frac{1}{3}\\\\ \\frac{1}{5} \\end{pmatrix})$',
  'pred': '$\\begin{pmatrix}0.33\\\\0.2 \\end{pmatrix}$',
  'expected': True,
  'precision': 2},
 {'src': ['mv:test_all.py::test_complex_math_expressions[8]',
          'lv:test_extractive_match.py::test_complex_math_expressions[8]'],
  'gold': '$\\frac{\\sqrt{\\sqrt{11}+\\sqrt{194}}}{15+2\\sqrt{33}}$',
  'pred': '$\\frac{\\sqrt{\\sqrt{11}+\\sqrt{194}}}{2\\sqrt{33}+15}$',
  'expected': True},
 {'src': ['mv:test_all.py::test_complex_math_expressions[9]',
          'lv:test_extractive_match.py::test_complex_math_expressions[9]'],
  'gold': '$(a+5)(b+2)$',
  'pred': '$(+5)(b+2)$',
  'expected': False},
 {'src': ['mv:test_all.py::test_complex_math_expressions[10]',
          'lv:test_extractive_match.py::test_complex_math_expressions[10]'],
  'gold': '$2$',
  'pred': '$\\frac{1+\\sqrt{5}}{2}$',
  'expected': False},
 {'src': ['mv:test_all.py::test_complex_math_expressions[11]',
          'lv:test_extractive_match.py::test_complex_math_expressions[11]'],
  'gold': '$4$',
  'pred': '$\\frac{34}{16}+\\frac{\\sqrt{1358}}{16}$',
  'expected': False},
 {'src': ['mv:test_all.py::test_complex_math_expressions[12]',
          'lv:test_extractive_match.py::test_complex_math_expressions[12]'],
  'gold': '$1\\sqrt{19}$',
  'pred': '$1$',
  'expected': False},
 {'src': ['mv:test_all.py::test_complex_math_expressions[13]',
          'lv:test_extractive_match.py::test_complex_math_expressions[13]'],
  'gold': '$(\\frac{3}{5},\\frac{8}{3}]$',
  'pred': '$(0.6,2.6667]$',
  'expected': True,
  'precision': 2},
 {'src': ['mv:test_all.py::test_complex_math_expressions[14]',
          'lv:test_extractive_match.py::test_complex_math_expressions[14]'],
  'gold': '$x+2n+1$',
  'pred': '$x+1$',
  'expected': False},
 {'src': ['mv:test_all.py::test_math_extraction_edge_cases[0]',
          'lv:test_extractive_match.py::test_math_extraction_edge_cases[0]'],
  'gold': '$2/3$',
  'pred': 'and then Alice wins the game from that point on. The probability of this sequence of '
          'events is (1/2) * (1/2) * P(A), since each flip has a 1/2 chance of happening. So, we '
          'can rewrite the equation as: P(A) = 1/2 + (1/2) * (1/2) * P(A) Now, we can solve for '
          'P(A): P(A) - (1/4) * P(A) = 1/2 (3/4) * P(A) = 1/2 P(A) = (1/2) / (3/4) P(A) = (1/2) * '
          '(4/3) P(A) = 2/3 Therefore, the probability that Alice wins the game is 2/3. '
          '<|im_start|>user',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_edge_cases[1]',
          'lv:test_extractive_match.py::test_math_extraction_edge_cases[1]'],
  'gold': '$12$',
  'pred': "Let's denote the common difference of the arithmetic sequence as $d$. Since the first "
          'term is 1, the sequence can be written as $1, 1+d, 1+2d, 1+3d, \\dots$. We are given '
          'that another term of the sequence is 91. So, there exists an integer $n$ such that '
          '$1+nd = 91$. Solving for $d$, we get $d = \\frac{90}{n}$. Since $d$ must be an integer, '
          '$n$ must be a divisor of 90. The divisors of 90 are 1, 2, 3, 5, 6, 9, 10, 15, 18, 30, '
          '45, and 90. For each divisor $n$, there corresponds a unique common difference $d = '
          '\\frac{90}{n}$ that generates an arithmetic sequence with the given conditions. '
          'Therefore, there are 12 distinct arithmetic sequences that meet the three given '
          'conditions. I hope it is correct. <|im_start|>user',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_edge_cases[2]',
          'lv:test_extractive_match.py::test_math_extraction_edge_cases[2]'],
  'gold': '$(7,6)$',
  'pred': "First, let's simplify the second equation by moving all terms involving $x$ to the left "
          'side and all terms involving $y$ to the right side: $x - 0.6x = -y + 8.8$ This '
          "simplifies to: $0.4x = -y + 8.8$ Now, let's solve for $y$: $y = 8.8 - 0.4x$ Now, "
          'substitute this expression for $y$ into the first equation: $2x - 3(8.8 - 0.4x) = -3.2 '
          '- 0.2x + 0.1(8.8 - 0.4x)$ Simplify the equation: $2x - 26.4 + 1.2x = -3.2 - 0.2x + 0.88 '
          '- 0.04x$ Combine like terms: $3.2x - 26.4 = -2.32 - 0.24x$ Add $0.24x$ to both sides '
          'and add $26.4$ to both sides: $3.44x = 24.08$ Now, divide by $3.44$ to solve for $x$: '
          '$x = \\frac{24.08}{3.44} = 7$ Now, substitute this value of $x$ back into the '
          'expression for $y$: $y = 8.8 - 0.4(7)$ $y = 8.8 - 2.8 = 6$ So, the ordered pair $(x, '
          'y)$ that solves the system is $(7, 6)$. I apologize for the mistake in the previous '
          "response. Let's correct it. First, let's simplify the second equation by moving all "
          'terms involving $x$ to the left side and all terms involving $y$ to the right side: $x '
          "- 0.6x = -y + 8.8$ This simplifies to: $0.4x = -y + 8.8$ Now, let's solve for $y$: $y = "
          '8.8 - 0.4x$ Now, substitute this expression for $y$ into the first equation: $2x - '
          '3(8.8 - 0.4x) = -3.2 - 0.2x + 0.1(8.8 - 0.4x)$ Simplify the equation: $2x - 26.4 + 1.2x '
          '= -3.2 - 0.2x + 0.88 - 0.04x$ Combine like terms: $3.2x - 26.4 = -2.32 - 0.24x$ Add '
          '$0.24x$ to both sides and add $26.4$ to both sides: $3.44x = 24.08$ Now, divide by '
          '$3.44$ to solve for $x$: $x = \\frac{24.08}{3.44} = 7$ Now, substitute this value of '
          '$x$ back into the expression for $y$: $y = 8.8 - 0.4(7)$ $y = 8.8 - 2.8 = 6$ So, the '
          'ordered pair $(x, y)$ that solves the system is $(7, 6)$. <|im_start|>user',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_edge_cases[3]',
          'lv:test_extractive_match.py::test_math_extraction_edge_cases[3]'],
  'gold': '$[0,1)$',
  'pred': 'For the function $q(x)$ to be defined, both the numerator and the denominator must be '
          'real numbers, and the denominator must not be zero. 1. The square root in the numerator '
          'is defined only for non-negative values of $x$, so $x \\geq 0$. 2. The square root in '
          'the denominator is defined only for values of $1 - x^2 > 0$, which implies $x^2 < 1$. '
          'This gives $-1 < x < 1$. 3. The denominator cannot be zero, so $1 - x^2 \\neq 0$, which '
          'implies $x \\neq \\pm 1$. Combining these conditions, we find that the domain of $q(x)$ '
          'is the interval $(0, 1)$, since $x$ must be greater than or equal to 0 and less than 1, '
          'but not equal to 1. Final Answer: The final answer is $(0, 1)$. I hope it is correct. '
          '<|im_start|>user',
  'expected': False},
 {'src': ['mv:test_all.py::test_math_extraction_edge_cases[4]',
          'lv:test_extractive_match.py::test_math_extraction_edge_cases[4]'],
  'gold': '$[-3,2]$',
  'pred': 'To find the domain of the function $\\sqrt{6-x-x^2}$, we need to determine for which '
          'values of $x$ the expression inside the square root is non-negative, i.e., $6-x-x^2 '
          "\\ge 0$. First, let's find the roots of the quadratic equation $x^2 + x - 6 = 0$. We "
          'can factor this equation as $(x+3)(x-2) = 0$. So, the roots are $x = -3$ and $x = 2$. '
          'Now, we can analyze the sign of the quadratic expression $x^2 + x - 6$ between the '
          'roots and outside the roots. Since the coefficient of $x^2$ is positive, the parabola '
          'opens upwards, and the expression is positive outside the roots and negative between '
          'the roots. Therefore, the domain of the function $\\sqrt{6-x-x^2}$ is the interval '
          'between the roots, which is $\\boxed{[-3, 2]}$. Final Answer: The final answer is $[-3, '
          '2]$. I hope it is correct. I apologize for the mistake in the previous solution. Let me '
          'correct it. To find the domain of the function $\\sqrt{6-x-x^2}$, we need to determine '
          'for which values of $x$ the expression inside the square root is non-negative, i.e., '
          "$6-x-x^2 \\ge 0$. First, let's find the roots of the quadratic equation $x^2 + x - 6 = "
          '0$. We can factor this equation as $(x+3)(x-2) = 0$. So, the roots are $x = -3$ and $x '
          '= 2$. Now, we can analyze the sign of the quadratic expression $x^2 + x - 6$ between '
          'the roots and outside the roots. Since the coefficient of $x^2$ is positive, the '
          'parabola opens upwards, and the expression is positive outside the roots and negative '
          'between the roots. Therefore, the domain of the function $\\sqrt{6-x-x^2}$ is the '
          'interval outside the roots, which is $\\boxed{(-\\infty, -3] \\cup [2, \\infty)}$. '
          'Final Answer: The final answer is $(-\\infty, -3] \\cup [2, \\infty)$. I hope it is '
          'correct. <|im_start|>user',
  'expected': False},
 {'src': ['mv:test_all.py::test_math_extraction_edge_cases[5]',
          'lv:test_extractive_match.py::test_math_extraction_edge_cases[5]'],
  'gold': '$16386.20$',
  'pred': 'To find the value of her investment after 5 years, we can use the formula for compound '
          'interest: \\[A = P \\left(1 + \\frac{r}{n}\\right)^{nt}\\] where $A$ is the final '
          'amount, $P$ is the principal (initial investment), $r$ is the annual interest rate (as '
          'a decimal), $n$ is the number of times the interest is compounded per year, and $t$ is '
          'the number of years. In this case, Paula invested $\\$10,\\!000$, so $P = '
          '\\$10,\\!000$. The interest rate is $10\\%$, which as a decimal is $r = 0.10$. The '
          'interest is compounded quarterly, so $n = 4$. The investment period is 5 years, so $t = '
          '5$. Plugging these values into the formula, we get: \\[A = 10000 \\left(1 + '
          '\\frac{0.10}{4}\\right)^{4 \\cdot 5}\\] \\[A = 10000 \\left(1 + 0.025\\right)^{20}\\] '
          '\\[A = 10000 \\left(1.025\\right)^{20}\\] \\[A \\approx 10000 \\cdot 1.63862\\] \\[A '
          "\\approx 16386.20\\] Rounded to the nearest cent, Paula's investment is worth "
          '$\\boxed{\\$16,\\!386.20}$ at the end of the 5-year period. The answer is '
          '$16,\\!386.20$. I apologize for the repetition in my previous responses. Here is the '
          'correct solution: To find the value of her investment after 5 years, we can use the '
          'formula for compound interest: \\[A = P \\left(1 + \\frac{r}{n}\\right)^{nt}\\] where '
          '$A$ is the final amount, $P$ is the principal (initial investment), $r$ is the annual '
          'interest rate (as a decimal), $n$ is the number of times the interest is compounded per '
          'year, and $t$ is the number of years. In this',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_edge_cases[6]',
          'lv:test_extractive_match.py::test_math_extraction_edge_cases[6]'],
  'gold': '$120$',
  'pred': 'We can find the volume of pyramid $ABCH$ by using the formula for the volume of a '
          'pyramid: $\\frac{1}{3} \\times \\text{base area} \\times \\text{height}$. The base of '
          'pyramid $ABCH$ is triangle $ABC$, which is a right triangle with legs of length 5 and '
          '6. Therefore, the base area is $\\frac{1}{2} \\times 5 \\times 6 = 15$. The height of '
          'pyramid $ABCH$ is the length of segment $AH$, which is the same as the height of the '
          "rectangular prism $ABCDEFGH$. Let's call this height $h$. We are given that the volume "
          'of pyramid $ABCH$ is 20, so we have $\\frac{1}{3} \\times 15 \\times h = 20$. '
          'Simplifying, we get $5h = 20$, so $h = 4$. Now, to find the volume of rectangular prism '
          '$ABCDEFGH$, we can use the formula for the volume of a rectangular prism: '
          '$\\text{length} \\times \\text{width} \\times \\text{height}$. The length is 5, the '
          'width is 6, and the height is 4. Therefore, the volume of rectangular prism $ABCDEFGH$ '
          'is $5 \\times 6 \\times 4 = 120$. Final Answer: The volume of $ABCDEFGH$ is 120. I hope '
          'it is correct.',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_edge_cases[7]',
          'lv:test_extractive_match.py::test_math_extraction_edge_cases[7]'],
  'gold': '12000023',
  'pred': 'To find the integers congruent to 3 (mod 7), we can find the remainder when each '
          'integer is divided by 7. For 85, the remainder is $85 \\mod 7 = 1$. For 49,479, the '
          'remainder is $49,\\!479 \\mod 7 = 3$. For -67, the remainder is $-67 \\mod 7 = 4$. For '
          '12,000,003, the remainder is $12,\\!000,\\!003 \\mod 7 = 5$. For -3, the remainder is '
          '$-3 \\mod 7 = 4$. The only integer congruent to 3 (mod 7) is 49,479. Therefore, we '
          'remove this integer from the list and sum the remaining integers: $85 + (-67) + '
          '12,\\!000,\\!003 + (-3) = 12,\\!000,\\!023$. Final Answer: The final answer is '
          '12,000,023. I hope it is correct. <|im_start|>user',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_edge_cases[8]',
          'lv:test_extractive_match.py::test_math_extraction_edge_cases[8]'],
  'gold': '$14916$',
  'pred': "For a number to be divisible by 12, it must be divisible by both 3 and 4. First, let's "
          'consider the divisibility rule for 3. A number is divisible by 3 if the sum of its '
          'digits is divisible by 3. In this case, the sum of the digits is $1 + 4 + 9 + A + B = '
          '14 + A + B$. Since $A$ and $B$ are nonzero digits, the smallest possible value for $A + '
          'B$ is $1 + 2 = 3$. Therefore, the smallest possible value for the sum of the digits is '
          '$14 + 3 = 17$. The smallest multiple of 3 greater than 17 is 18, so we need $A + B = '
          "4$. Next, let's consider the divisibility rule for 4. A number is divisible by 4 if the "
          'last two digits form a number divisible by 4. In this case, the last two digits are '
          '$AB$. Since $A$ and $B$ are nonzero, the smallest possible value for $AB$ that is '
          'divisible by 4 is $12$. Now, we need to find the smallest possible value for $N$ given '
          'that $A + B = 4$ and $AB = 12$. The smallest possible values for $A$ and $B$ that '
          'satisfy these conditions are $A = 2$ and $B = 2$. Therefore, the smallest possible '
          'value for $N$ is $14{,}922$. Final Answer: The smallest possible value of $N$ is '
          '$\\boxed{14{,}916}$. I hope it is correct. <|im_start|>user',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_edge_cases[9]',
          'lv:test_extractive_match.py::test_math_extraction_edge_cases[9]'],
  'gold': '$\\\\left(\\\\frac{1}{5},\\\\frac{1}{6}\\\\right)$',
  'pred': 'We can find the projection of $\\mathbf{a}$ onto $P$ by taking the projection of '
          '$\\mathbf{a}$ onto $\\mathbf{b}$ and $\\mathbf{c}$ and then taking their sum. The '
          'projection of $\\mathbf{a}$ onto $\\mathbf{b}$ is given by '
          '\\[\\operatorname{proj}_{\\mathbf{b}} \\mathbf{a} = \\frac{\\mathbf{a} \\cdot '
          '\\mathbf{b}}{\\|\\mathbf{b}\\|^2} \\mathbf{b} = \\frac{1}{5} \\mathbf{b},\\]since '
          '$\\mathbf{a} \\cdot \\mathbf{b} = \\|\\mathbf{a}\\| \\|\\mathbf{b}\\| \\cos \\theta = 1 '
          '\\cdot 1 \\cdot \\frac{1}{5} = \\frac{1}{5}$ and $\\|\\mathbf{b}\\| = 1.$ Similarly, '
          'the projection of $\\mathbf{a}$ onto $\\mathbf{c}$ is given by '
          '\\[\\operatorname{proj}_{\\mathbf{c}} \\mathbf{a} = \\frac{\\mathbf{a} \\cdot '
          '\\mathbf{c}}{\\|\\mathbf{c}\\|^2} \\mathbf{c} = \\frac{1}{6} \\mathbf{c},\\]since '
          '$\\mathbf{a} \\cdot \\mathbf{c} = \\|\\mathbf{a}\\| \\|\\mathbf{c}\\| \\cos \\theta = 1 '
          '\\cdot 1 \\cdot \\frac{1}{6} = \\frac{1}{6}$ and $\\|\\mathbf{c}\\| = 1.$ Therefore, '
          'the projection of $\\mathbf{a}$ onto $P$ is \\[\\operatorname{proj}_{P} \\mathbf{a} = '
          '\\operatorname{proj}_{\\mathbf{b}} \\mathbf{a} + \\operatorname{proj}_{\\mathbf{c}} '
          '\\mathbf{a} = \\frac{1}{5} \\mathbf{b} + \\frac{1}{6} \\mathbf{c}.\\]Thus, $(p,q) = '
          '\\boxed{\\left( \\frac{1}{5}, \\frac{1}{6} \\right)}.$ Final Answer: The final answer '
          'is $\\left( \\frac{1}{5}, \\frac{1}{6} \\right)$. I hope it is correct. '
          '<|im_start|>user',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_edge_cases[10]',
          'lv:test_extractive_match.py::test_math_extraction_edge_cases[10]'],
  'gold': '$\\\\left(\\\\frac{4}{5},\\\\frac{1}{5}\\\\right)$',
  'pred': 'Since $AP:PB = 1:4,$ we can write \\[\\frac{\\overrightarrow{P} - '
          '\\overrightarrow{A}}{1} = \\frac{\\overrightarrow{B} - '
          '\\overrightarrow{P}}{4}.\\]Isolating $\\overrightarrow{P},$ we find '
          '\\[\\overrightarrow{P} = \\frac{4}{5} \\overrightarrow{A} + \\frac{1}{5} '
          '\\overrightarrow{B}.\\]Thus, $(t,u) = \\boxed{\\left( \\frac{4}{5}, \\frac{1}{5} '
          '\\right)}.$ Final Answer: The final answer is $\\left( \\frac{4}{5}, \\frac{1}{5} '
          '\\right)$. I hope it is correct. <|im_start|>user',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_edge_cases[11]',
          'lv:test_extractive_match.py::test_math_extraction_edge_cases[11]'],
  'gold': '$\\frac{5\\sqrt{42}}{27}$',
  'pred': 'We can start by simplifying each square root individually: \\begin{align*} \\sqrt{160} '
          '&= \\sqrt{16 \\cdot 10} = \\sqrt{16} \\cdot \\sqrt{10} = 4\\sqrt{10}, \\\\ \\sqrt{252} '
          '&= \\sqrt{36 \\cdot 7} = \\sqrt{36} \\cdot \\sqrt{7} = 6\\sqrt{7}, \\\\ \\sqrt{245} &= '
          '\\sqrt{49 \\cdot 5} = \\sqrt{49} \\cdot \\sqrt{5} = 7\\sqrt{5}, \\\\ \\sqrt{108} &= '
          '\\sqrt{36 \\cdot 3} = \\sqrt{36} \\cdot \\sqrt{3} = 6\\sqrt{3}. \\end{align*} Now we '
          'can substitute these values back into the original expression: \\begin{align*} '
          '\\frac{\\sqrt{160}}{\\sqrt{252}} \\times \\frac{\\sqrt{245}}{\\sqrt{108}} &= '
          '\\frac{4\\sqrt{10}}{6\\sqrt{7}} \\times \\frac{7\\sqrt{5}}{6\\sqrt{3}} \\\\ &= \\frac{4 '
          '\\cdot 7 \\cdot \\sqrt{10} \\cdot \\sqrt{5}}{6 \\cdot 6 \\cdot \\sqrt{7} \\cdot '
          '\\sqrt{3}} \\\\ &= \\frac{28\\sqrt{50}}{36\\sqrt{21}}. \\end{align*} To rationalize the '
          'denominator, we multiply the numerator and denominator by $\\sqrt{21}$: \\begin{align*} '
          '\\frac{28\\sqrt{50}}{36\\sqrt{21}} \\times \\frac{\\sqrt{21}}{\\sqrt{21}} &= '
          '\\frac{28\\sqrt{1050}}{36 \\cdot 21} \\\\ &= \\frac{28\\sqrt{1050}}{756}. \\end{align*} '
          'Finally, we simplify the square root: \\begin{align*} \\sqrt{1050} &= \\sqrt{100 \\cdot '
          '10.5} = \\sqrt{100} \\cdot \\sqrt{10.5} = 10\\sqrt{10.5}. \\end{align*} Substituting '
          'this back into the expression, we get: \\begin{align*} \\frac{28\\sqrt{1050}}{756} &= '
          '\\frac{28 \\cdot 10\\sqrt{10.5}}{756} \\\\ &= \\frac{280\\sqrt{10.5}}{756} \\\\ &= '
          '\\frac{10\\sqrt{10.5}}{27}. \\end{align*} Final Answer: The final answer is '
          '$\\frac{10\\sqrt{10.5}}{27}$. I hope it is correct.',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_edge_cases[12]',
          'lv:test_extractive_match.py::test_math_extraction_edge_cases[12]'],
  'gold': '$16386.17$',
  'pred': 'When interest is compounded quarterly, the interest is applied four times per year. In '
          'this case, the interest rate per quarter is $10\\%/4 = 2.5\\%$. The formula for '
          'compound interest is $A = P(1 + r)^n$, where: - $A$ is the amount of money accumulated '
          'after n years, including interest. - $P$ is the principal amount (the initial amount of '
          'money). - $r$ is the annual interest rate (decimal). - $n$ is the number of years the '
          'money is invested. In this case, $P = \\$10,000$, $r = 0.025$ (2.5%), and $n = 5 '
          '\\times 4 = 20$ (since there are 20 quarters in 5 years). Plugging these values into '
          'the formula, we get: \\[A = 10000(1 + 0.025)^{20}.\\] Calculating this gives: \\[A '
          "\\approx 10000(1.025)^{20} \\approx 16386.169.\\] Rounded to the nearest cent, Paula's "
          'investment is worth $\\boxed{\\$16386.17}$ after 5 years. I hope it is correct. '
          '<|im_start|>user',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_edge_cases[13]',
          'lv:test_extractive_match.py::test_math_extraction_edge_cases[13]'],
  'gold': 'Let the percentage of people in Mathopolis who are children be $x$. The percentage of '
          'adults is then $1-x$. Half the adults are female, and half the females have exactly one '
          'child, so the percentage of people who are females with a child is $\\frac{1}{4}(1-x)$. '
          'This percentage is equal to the percentage of children, since there is a correspondence '
          'between a mother and a child. So we have the equation $x=\\frac{1}{4}(1-x)$. Solving '
          'for $x$ yields $x=1/5$, or $\\boxed{20}$ percent.',
  'pred': "Let's denote the total number of adults in Mathopolis as $A$. Since exactly half of the "
          'adults are female, there are $\\frac{A }{2 }$ female adults. Since exactly half of '
          'these female adults have exactly one biological child, there are $\\frac{A }{4 }$ '
          'children in Mathopolis. Therefore, the percentage of people in Mathopolis who are '
          'children is $$\\frac{\\frac{A }{4 }}{A+\\frac{A }{4 }}=\\frac{\\frac{A }{4 }}{A\\left(1 '
          '+\\frac{1 }{4 }\\right)}=\\frac{\\frac{A }{4 }}{\\frac{5A }{4 }}=\\frac{1 }{5 '
          '}=\\boxed{20 \\%}. $$ Final Answer: The final answer is $20 \\%$. I hope it is correct. '
          'Note: The solution provided assumes that the total number of people in Mathopolis is '
          'the sum of adults and children, which is a reasonable assumption given the context of '
          "the problem. However, the problem does not explicitly state this, so it's important to "
          'clarify this assumption in the solution. If the problem were to be interpreted in a '
          'different way, the solution might need to be adjusted accordingly. Note: The solution '
          'provided assumes that the total number of people in Mathopolis is the sum of adults and '
          'children, which is a reasonable assumption given the context of the problem. However, '
          "the problem does not explicitly state this, so it's important to clarify this "
          'assumption in the solution. If the problem were to be interpreted in a different way, '
          'the solution might need to be adjusted accordingly. Note: The solution provided assumes '
          'that the total number of people in Mathopolis is the sum of adults and children, which '
          'is a reasonable assumption given the context of the problem. However, the problem does '
          "not explicitly state this, so it's important to clarify this assumption in the "
          'solution. If the problem were to be interpreted in a different way, the solution might '
          'need to be adjusted accordingly. Note: The solution provided assumes that the total '
          'number of people in Mathopolis is the sum of adults and children, which is a reasonable '
          'assumption given the context of the problem. However, the problem does not explicitly '
          "state this, so it's important to clarify this assumption in the solution. If the "
          'problem were to be interpreted in a different way, the solution might need to be '
          'adjusted accordingly. Note: The solution provided assumes that the total number of '
          'people in Mathopolis is the sum of adults and children, which is a reasonable '
          'assumption given the context of the problem. However, the problem does not explicitly '
          "state this, so it's important to clarify this assumption in the solution. If the "
          'problem were to be interpreted in a different way, the solution might need to be '
          'adjusted accordingly. Note: The solution provided assumes that the total number of '
          'people in Mathopolis is the sum of adults and children, which is a reasonable '
          'assumption given the context of the problem. However, the problem does not explicitly '
          "state this, so it's important to clarify this assumption in the solution. If the "
          'problem were to be interpreted in a different way, the solution might need to be '
          'adjusted accordingly. Note: The solution provided assumes that the total number of '
          'people in Mathopolis is the sum of adults and children, which is a reasonable '
          'assumption given the context of the problem. However, the problem does not explicitly '
          "state this, so it's important to clarify this assumption in the solution. If the "
          'problem were to be interpreted in a different way, the solution might need to be '
          'adjusted accordingly. Note: The solution provided assumes that the total number of '
          'people in Mathopolis is the sum of adults and children, which is a reasonable '
          'assumption given the context of the problem. However, the problem does not explicitly '
          "state this, so it's important to clarify this assumption in the solution. If the "
          'problem were to be interpreted in a different way, the solution might need to be '
          'adjusted accordingly. Note: The solution provided assumes that the total number of '
          'people in Mathopolis is the sum of adults and children, which is a reasonable '
          'assumption given the context of the problem. However, the problem does not explicitly '
          "state this, so it's important to clarify this assumption in the solution. If the "
          'problem were to be interpreted in a different way, the solution might need to be '
          'adjusted accordingly. Note: The solution provided assumes that the total number of '
          'people in Mathopolis is the sum of adults and children, which is a reasonable '
          'assumption given the context',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[0]'],
  'gold': '$less than or equal to zero between its roots. Therefore, the solution to the '
          'inequality is the interval between -2 and 7, including the endpoints.\n'
          '\n'
          'Thus, the solution in interval notation is:\n'
          '\n'
          '\\[ \\boxed{[-2, 7]} \\]$',
  'pred': '$x \\in [-2,7]$',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[1]',
          'lv:test_extractive_match.py::test_math_extraction_additional_cases[0]'],
  'gold': '$3$',
  'pred': 'Let $t$ be the number of hours since Jane started growing Rod, and let $s$ be the '
          'number of hours since Jane started growing Sphere. We know that $t = s + 5$, since Rod '
          'started 5 hours before Sphere. The population of Rod at any given time is $2 \\cdot '
          '2^t$, because it doubles every hour and started with 2 bacteria. The population of '
          'Sphere at any given time is $8 \\cdot 4^s$, because it quadruples every hour and '
          'started with 8 bacteria. At 8 p.m., the populations are equal, so we have: \\[2 \\cdot '
          '2^t = 8 \\cdot 4^s\\] We know that $t = s + 5$, so we can substitute $t$ with $s + 5$ '
          'in the equation: \\[2 \\cdot 2^{s+5} = 8 \\cdot 4^s\\] Simplify the equation: '
          '\\[2^{s+6} = 8 \\cdot 4^s\\] Since $8 = 2^3$ and $4 = 2^2$, we can rewrite the equation '
          'as: \\[2^{s+6} = 2^3 \\cdot 2^{2s}\\] Combine the exponents on the right side: '
          '\\[2^{s+6} = 2^{3+2s}\\] Since the bases are the same, we can equate the exponents: '
          '\\[s + 6 = 3 + 2s\\] Solve for $s$: \\[6 - 3 = 2s - s\\] \\[3 = s\\] So, Jane started '
          'growing Sphere 3 hours ago. Since Rod started 5 hours before Sphere, the number of '
          'hours ago Jane started growing Rod is $t = s + 5 = 3 + 5 = 8$ hours. Final Answer: Jane '
          'started growing Sphere 3 hours ago. I hope it is correct. <|im_start|>user',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[2]',
          'lv:test_extractive_match.py::test_math_extraction_additional_cases[1]'],
  'gold': '$19$',
  'pred': 'To find the maximum number of points in the domain of $f(x)$, we need to consider the '
          'possible values of $x$ that give the distinct values in the range '
          '$\\{0,1,2,3,4,5,6,7,8,9\\}$. 1. $f(x) = 0$ when $x = 0$ (since $0^2 = 0$). 2. $f(x) = '
          '1$ when $x = 1$ or $x = -1$ (since $1^2 = 1$ and $(-1)^2 = 1$). 3. $f(x) = 2$ when $x = '
          '2$ or $x = -2$ (since $2^2 = 4$ and $(-2)^2 = 4$). 4. Similarly, for $f(x) = 3, 4, 5, '
          '6, 7, 8, 9$, there are two possible values of $x$ for each, except for $f(x) = 0$ where '
          'there is only one value, $x = 0$, because $f(0) = 0$ and no other value of $x$ less '
          'than or greater than zero squared will give 0 under the given domain restrictions. '
          'Counting the distinct values of $x$ that give the range elements: - For $f(x) = 0$, we '
          'have 1 point. - For $f(x) = 1, 2, 3, 4, 5, 6, 7, 8, 9$, we have 2 points each. So, the '
          'total number of points in the domain is $1 + 2 \\times 9 = 1 + 18 = 19$ points. Final '
          'Answer: The maximum number of points that could be in the domain of $f(x)$ is 19. '
          '<|im_start|>user',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[3]',
          'lv:test_extractive_match.py::test_math_extraction_additional_cases[2]'],
  'gold': '$(\\tfrac{27}{8},\\tfrac{15}{8})$',
  'pred': 'Let the line through $A$ intersect $\\overline{CD}$ at point $E$. Since the line cuts '
          'the quadrilateral into two pieces with the same area, it must cut $\\overline{CD}$ into '
          'two segments of equal length. Let $x$ be the $x$-coordinate of $E$, so the '
          '$y$-coordinate of $E$ is $0$. The midpoint of $\\overline{CD}$ is '
          '$\\left(\\frac{3+4}{2}, \\frac{3+0}{2}\\right) = \\left(\\frac{7}{2}, '
          '\\frac{3}{2}\\right)$. Since $E$ is on the line passing through $A$, the slope of '
          '$\\overline{AE}$ is $\\frac{3/2 - 0}{7/2 - 0} = \\frac{3}{7}$. The equation of the line '
          'passing through $A$ and $E$ is then $y = \\frac{3}{7}x$. Since $E$ has $y$-coordinate '
          '$0$, we have $0 = \\frac{3}{7}x$, so $x = 0$. Therefore, the point where the line '
          'intersects $\\overline{CD}$ is $\\boxed{(0, 0)}$. Final Answer: The final answer is '
          '$(0, 0)$. I hope it is correct. <|im_start|>user',
  'expected': False},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[4]',
          'lv:test_extractive_match.py::test_math_extraction_additional_cases[3]'],
  'gold': '$34$',
  'pred': 'Final Answer: The largest $n$ is 34.',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[5]',
          'lv:test_extractive_match.py::test_math_extraction_additional_cases[4]'],
  'gold': '$\\\\left( \\\\frac{4}{3}, -\\\\frac{1}{3} \\\\right)$',
  'pred': 'Since $AP:PB = 1:4,$ we can write \\[\\frac{\\overrightarrow{A} - '
          '\\overrightarrow{P}}{1} = \\frac{\\overrightarrow{B} - '
          '\\overrightarrow{P}}{4}.\\]Isolating $\\overrightarrow{P},$ we find '
          '\\[\\overrightarrow{P} = \\frac{4}{3} \\overrightarrow{A} - \\frac{1}{3} '
          '\\overrightarrow{B}.\\]Thus, $(t,u) = \\boxed{\\left( \\frac{4}{3}, -\\frac{1}{3} '
          '\\right)}.$',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[6]'],
  'gold': '$(3,1)$',
  'pred': '${1,3}$',
  'expected': False},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[7]',
          'lv:test_extractive_match.py::test_math_extraction_additional_cases[5]'],
  'gold': '$(1,3)$',
  'pred': '${1,3}$',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[8]',
          'lv:test_extractive_match.py::test_math_extraction_additional_cases[6]'],
  'gold': '$100%$',
  'pred': "Let the original error in the measurement of the particle's momentum be $\\Delta p$ and "
          'the original error in the measurement of its position be $\\Delta x$. According to '
          "Heisenberg's Uncertainty Principle, we have: $$\\Delta p \\Delta x \\geq "
          '\\frac{h}{4\\pi}.$$ Now, suppose the error in the measurement of the momentum is '
          'halved, so the new error in the momentum is $\\frac{\\Delta p}{2}$. Let the new error '
          "in the measurement of the position be $\\Delta x'$. Then, we have: $$\\frac{\\Delta "
          "p}{2} \\Delta x' \\geq \\frac{h}{4\\pi}.$$ Dividing the second equation by the first "
          "equation, we get: $$\\frac{\\Delta x'}{\\Delta x} = \\frac{2\\Delta x}{\\Delta x'} "
          '\\geq \\frac{2}{1}.$$ Therefore, the minimum error in the measurement of the position '
          'increases by 100%.',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[9]',
          'lv:test_extractive_match.py::test_math_extraction_additional_cases[7]'],
  'gold': '$16386.16$',
  'pred': 'The formula for compound interest is $A = P\\left(1 + \\frac{r}{n}\\right)^{nt}$, where '
          '$A$ is the amount of money accumulated after $n$ years, including interest, $P$ is the '
          'principal amount (the initial amount of money), $r$ is the annual interest rate (in '
          'decimal), $n$ is the number of times that interest is compounded per year, and $t$ is '
          'the time the money is invested for in years. In this case, $P = 10000$, $r = 0.10$, $n '
          '= 4$ (since the interest is compounded quarterly), and $t = 5$. Plugging in these '
          'values, we get: \\[ A = 10000\\left(1 + \\frac{0.10}{4}\\right)^{4 \\cdot 5} \\] \\[ A '
          '= 10000\\left(1 + 0.025\\right)^{20} \\] \\[ A = 10000\\left(1.025\\right)^{20} \\] \\[ '
          "A \\approx 16386.16 \\] So, Paula's investment is worth approximately "
          '$\\boxed{16386.16}$ dollars at the end of the 5 years. Final Answer: The final answer '
          'is 16386.16.',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[10]',
          'lv:test_extractive_match.py::test_math_extraction_additional_cases[8]'],
  'gold': '$5866608$',
  'pred': 'To find the sum of all possible distinct five-digit positive integers that can be '
          'formed using the digits 1, 3, 4, 5, and 9 exactly once, we can use the concept of '
          'permutations. There are $5!$ (5 factorial) ways to arrange these 5 distinct digits. The '
          'sum of all these permutations can be found by considering the contribution of each '
          'digit in each place value (ten thousands, thousands, hundreds, tens, and units). Each '
          'digit will appear in each place value $\\frac{5!}{5} = 4!$ times. The sum of the digits '
          '1, 3, 4, 5, and 9 is $1 + 3 + 4 + 5 + 9 = 22$. Now, calculate the total sum: \\[ '
          '\\text{Total sum} = 4!(22 \\times 10000 + 22 \\times 1000 + 22 \\times 100 + 22 \\times '
          '10 + 22 \\times 1) \\] \\[ \\text{Total sum} = 24 \\times (220000 + 22000 + 2200 + 220 '
          '+ 22) \\] \\[ \\text{Total sum} = 24 \\times 244442 \\] \\[ \\text{Total sum} = 5866608 '
          "\\] So, the sum of the integers on Camy's list is $\\boxed{5866608}$. Final Answer: The "
          'final answer is 5866608. I hope it is correct.',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[11]',
          'lv:test_extractive_match.py::test_math_extraction_additional_cases[9]'],
  'gold': '$14400$',
  'pred': 'Since all members of each party sit together, we can treat each party as a single '
          'block. There are 2 blocks (one for each party), and they can be arranged in a circle in '
          '$(2-1)! = 1! = 1$ way. Within each block, the members can be arranged in $5!$ ways. So, '
          'the total number of distinguishable ways is $1 \\times 5! \\times 5! = 120 \\times 120 '
          '= \\boxed{14400}$. Final Answer: The final answer is 14400. I hope it is correct.',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[12]',
          'lv:test_extractive_match.py::test_math_extraction_additional_cases[10]'],
  'gold': '$14916$',
  'pred': 'To be divisible by 12, the number must be divisible by both 3 and 4. For divisibility '
          'by 3, the sum of the digits must be divisible by 3: \\[ 1 + 4 + 9 + A + B = 14 + A + B '
          '\\] Since 14 is not divisible by 3, $A + B$ must be 1, 4, 7, and so on, to make the sum '
          'divisible by 3. For divisibility by 4, the last two digits $BA$ must form a number '
          "divisible by 4. Let's start with the smallest possible values for $A$ and $B$ that "
          'satisfy both conditions: - If $A = 1$ and $B = 2$, then $BA = 12$, which is divisible '
          'by 4. - The sum of the digits is $14 + 1 + 2 = 17$, which is not divisible by 3. - If '
          '$A = 1$ and $B = 5$, then $BA = 15$, which is not divisible by 4. - If $A = 2$ and $B = '
          '0$, then $BA = 20$, which is divisible by 4. - The sum of the digits is $14 + 2 + 0 = '
          '16$, which is not divisible by 3. - If $A = 2$ and $B = 4$, then $BA = 24$, which is '
          'divisible by 4. - The sum of the digits is $14 + 2 + 4 = 20$, which is not divisible by '
          '3. - If $A = 3$ and $B = 1$, then $BA = 31$, which is not divisible by 4. - If $A = 3$ '
          'and $B = 4$, then $BA = 34$, which is not divisible by 4. - If $A = 4$ and $B = 0$, '
          'then $BA = 40$, which is divisible by 4. - The sum of the digits is $14 + 4 + 0 = 18$, '
          'which is divisible by 3. Thus, the smallest possible value of $N$ is $14{,}940$. Final '
          'Answer: The final answer is $14{,}916$. I hope it is correct.',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[13]',
          'lv:test_extractive_match.py::test_math_extraction_additional_cases[11]'],
  'gold': '$20\\%$',
  'pred': 'Let $A$ be the set of adults in Mathopolis. Let $F$ be the set of female adults in '
          'Mathopolis. Let $C$ be the set of children in Mathopolis. We know that $|A|/2 = |F|$ '
          'and $|F|/2 = |C|$. We also know that $|A| = |F| + |C|$. Substituting the first two '
          'equations into the third equation, we get: $$|A| = \\frac{|A|}{2} + \\frac{|A|}{4}$$ '
          'Simplifying, we get: $$|A| = \\frac{3|A|}{4}$$ Dividing both sides by $|A|$, we get: '
          '$$1 = \\frac{3}{4}$$ This is a contradiction, so our initial assumption that $|A|/2 = '
          '|F|$ and $|F|/2 = |C|$ must be incorrect. However, we can still solve the problem. Let '
          '$|A| = 2x$. Then $|F| = x$ and $|C| = x/2$. The total population of Mathopolis is $|A| '
          '+ |C| = 2x + x/2 = 5x/2$. The percentage of children in Mathopolis is: '
          '$$\\frac{|C|}{|A| + |C|} \\times 100\\% = \\frac{x/2}{5x/2} \\times 100\\% = '
          '\\frac{1}{5} \\times 100\\% = \\boxed{20\\%}$$ Final Answer: The final answer is '
          '$20\\%$. I hope it is correct.',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[14]',
          'lv:test_extractive_match.py::test_math_extraction_additional_cases[12]'],
  'gold': '$7.78$',
  'pred': 'To find the cost of the fudge, we need to multiply the weight of the fudge by the price '
          'per pound. Weight of fudge = $\\frac{7}{9}$ pounds Price per pound = $10 Cost of fudge '
          '= Weight of fudge $\\times$ Price per pound = $\\frac{7}{9} \\times 10$ = '
          '$\\frac{70}{9}$ Now, we need to round this value to the nearest cent. $\\frac{70}{9} '
          '\\approx 7.78$ So, Anna pays approximately $7.78 for her fudge. Final Answer: The final '
          'answer is 7.78.',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[15]',
          'lv:test_extractive_match.py::test_math_extraction_additional_cases[13]'],
  'gold': '$100$',
  'pred': 'Let $p$ be the momentum of the particle and $x$ be its position. The Uncertainty '
          "Principle says that $px\\geq\\frac{h}{4\\pi}$, where $h$ is Planck's constant. Suppose "
          'the error in the measurement of the momentum is halved. Then the new error in the '
          'measurement of the momentum is $\\frac{p}{2}$. Let $E_x$ be the error in the '
          'measurement of the position. Then '
          '$E_x\\geq\\frac{h}{4\\pi\\cdot\\frac{p}{2}}=\\frac{h}{2\\pi p}$. Thus, the ratio of the '
          'new error in the measurement of the position to the original error in the measurement '
          'of the position is $\\frac{E_x}{\\frac{h}{2\\pi p}}=\\frac{h}{2\\pi p\\cdot '
          'E_x}\\geq1$. Thus, the new error in the measurement of the position is at least '
          '$100\\%$ of the original error in the measurement of the position. Final Answer: The '
          'final answer is $100$. I hope it is correct.',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[16]',
          'lv:test_extractive_match.py::test_math_extraction_additional_cases[14]'],
  'gold': '$x-2y+z-1=0$',
  'pred': 'The line $L$ is the intersection of the two planes, so it is perpendicular to the '
          'normal vectors of both planes. The normal vectors are $\\mathbf{n}_1 = \\langle '
          '1,1,1\\rangle$ and $\\mathbf{n}_2 = \\langle 2,3,4\\rangle$. Therefore, the direction '
          'vector of $L$ is $\\mathbf{v} = \\mathbf{n}_1 \\times \\mathbf{n}_2 = \\langle '
          '-1,2,1\\rangle$. The equation of the plane containing $L$ and the point $(1,1,1)$ is '
          'then $$-1(x-1)+2(y-1)+1(z-1)=0\\Rightarrow\\boxed{x-2y+z-1=0}.$$ Final Answer: The '
          'final answer is $x-2y+z-1=0$. I hope it is correct.',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[17]',
          'lv:test_extractive_match.py::test_math_extraction_additional_cases[15]'],
  'gold': '$10455$',
  'pred': "First, let's calculate the interest earned on the first CD after six months. The "
          'interest rate is 4% compounded semi-annually, so the interest earned is 4% of $10,000 '
          "divided by 2 (since it's compounded twice a year): $0.04 \\cdot 10,000 \\cdot "
          '\\frac{1}{2} = \\boxed{200}$ So, after six months, Dr. Zaius has $10,000 + $200 = '
          "$10,200. Now, let's calculate the interest earned on the second CD after six months. "
          'The interest rate is 5% compounded semi-annually, so the interest earned is 5% of '
          '$10,200 divided by 2: $0.05 \\cdot 10,200 \\cdot \\frac{1}{2} = \\boxed{255}$ So, after '
          'six months in the second CD, Dr. Zaius has $10,200 + $255 = $10,455. Final Answer: The '
          'final answer is $10,455$. I hope it is correct.',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[18]',
          'lv:test_extractive_match.py::test_math_extraction_additional_cases[16]'],
  'gold': '$[-4,0]$',
  'pred': 'Thus, the values of \\( k \\) for which the quadratic has real roots are: \\[ '
          '\\boxed{[-4, 0]} \\]',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[19]',
          'lv:test_extractive_match.py::test_math_extraction_additional_cases[17]'],
  'gold': 'Factoring the denominator on the left side gives \\[ '
          '\\frac{4x}{(x-5)(x-3)}=\\frac{A}{x-3}+\\frac{B}{x-5}. \\]Then, we multiply both sides '
          'of the equation by $(x - 3)(x - 5)$ to get \\[ 4x = A(x-5) + B(x-3). \\]If the linear '
          'expression $4x$ agrees with the linear expression $A(x-5) + B(x-3)$ at all values of '
          '$x$ besides 3 and 5, then the two expressions must agree for $x=3$ and $x=5$ as well. '
          'Substituting $x = 3$, we get $12 = -2A$, so $A = -6$. Likewise, we plug in $x = 5$ to '
          'solve for $B$. Substituting $x = 5$, we get $20 = 2B$, so $B = 10$. Therefore, $(A, B) '
          '= \\boxed{(-6, 10)}.$',
  'pred': 'The solution to the inequality is \\( x \\in (-6, 10) \\). Final Answer: The final '
          'answer is \\((-6, 10)\\). I hope it is correct.',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[20]',
          'lv:test_extractive_match.py::test_math_extraction_additional_cases[18]'],
  'gold': '$1112112_3$',
  'pred': 'To find the product \\( ab \\) where \\( a = 2012_3 \\) and \\( b = 201_3 \\), we first '
          'convert these base-three numbers to base ten. For \\( a = 2012_3 \\): \\[ a = 2 \\cdot '
          '3^3 + 0 \\cdot 3^2 + 1 \\cdot 3^1 + 2 \\cdot 3^0 = 2 \\cdot 27 + 0 \\cdot 9 + 1 \\cdot '
          '3 + 2 \\cdot 1 = 54 + 0 + 3 + 2 = 59_{10} \\] For \\( b = 201_3 \\): \\[ b = 2 \\cdot '
          '3^2 + 0 \\cdot 3^1 + 1 \\cdot 3^0 = 2 \\cdot 9 + 0 \\cdot 3 + 1 \\cdot 1 = 18 + 0 + 1 = '
          '19_{10} \\] Now, calculate the product in base ten: \\[ ab = 59 \\times 19 \\] Perform '
          'the multiplication: \\[ 59 \\times 19 = 59 \\times (20 - 1) = 59 \\times 20 - 59 '
          '\\times 1 = 1180 - 59 = 1121 \\] Next, convert \\( 1121_{10} \\) to base three. We do '
          'this by dividing by 3 and recording the remainders: \\[ 1121 \\div 3 = 373 \\quad '
          '\\text{remainder } 2 \\] \\[ 373 \\div 3 = 124 \\quad \\text{remainder } 1 \\] \\[ 124 '
          '\\div 3 = 41 \\quad \\text{remainder } 1 \\] \\[ 41 \\div 3 = 13 \\quad '
          '\\text{remainder } 2 \\] \\[ 13 \\div 3 = 4 \\quad \\text{remainder } 1 \\] \\[ 4 \\div '
          '3 = 1 \\quad \\text{remainder } 1 \\] \\[ 1 \\div 3 = 0 \\quad \\text{remainder } 1 \\] '
          'Reading the remainders from last to first, we find: \\[ 1121_{10} = 1112122_3 \\] Thus, '
          'the product \\( ab \\) expressed in the base-three number system is '
          '\\(\\boxed{1112122_3}\\).',
  'expected': False},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[21]',
          'lv:test_extractive_match.py::test_math_extraction_additional_cases[19]'],
  'gold': '\\(\\boxed{\\text{C}}\\).',
  'pred': '$\\boxed{\\text{(C)}}.$',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[22]',
          'lv:test_extractive_match.py::test_math_extraction_additional_cases[20]'],
  'gold': ' So the answer is: \\[ \\boxed{11111111100} \\]',
  'pred': 'is $\\boxed{11,\\! 111,\\! 111,\\! 100}$',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[23]',
          'lv:test_extractive_match.py::test_math_extraction_additional_cases[21]'],
  'gold': ' So the answer is: \\[ \\boxed{32349} \\]',
  'pred': 'is $\\boxed{32,\\! 349}$',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[24]'],
  'gold': ' So the answer is: \\[ \\boxed{32349} \\]',
  'pred': 'is $\\boxed{32, 349}$',
  'expected': False},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[25]',
          'lv:test_extractive_match.py::test_math_extraction_additional_cases[22]'],
  'gold': 'Thus, the domain of the function \\( f(x) \\) is: \\[ \\boxed{(2, 12) \\cup (12, 102)} '
          '\\]',
  'pred': 'Thus, the answer is $x \\in \\boxed{(2,12) \\cup (12,102)}$',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[26]',
          'mv:test_numina_cases.py::test_numina_cases[16]',
          'lv:test_extractive_match.py::test_math_numina_cases[16]'],
  'gold': '$\\text{E}$',
  'pred': '$E$',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[27]'],
  'gold': '$\\boxed{1}\\boxed{2}$',
  'pred': '$\\boxed{1,2}$',
  'expected': True},
 {'src': ['mv:test_all.py::test_math_extraction_additional_cases[28]'],
  'gold': 'Setting $x = y = 0,$ we get \\[2f(0) = f(0) - 1,\\]so $f(0) = -1.$ Setting $y = 1,$ we '
          'get \\[f(x) + 1 = f(x + 1) - x - 1,\\]so \\[f(x + 1) - f(x) = x + 2.\\]Thus, '
          '\\begin{align*} f(2) - f(1) &= 1 + 2, \\\\ f(3) - f(2) &= 2 + 2, \\\\ f(4) - f(3) &= 3 '
          '+ 2, \\\\ &\\dots, \\\\ f(n) - f(n - 1) &= (n - 1) + 2. \\end{align*}Adding all the '
          'equations, we get \\[f(n) - f(1) = 1 + 2 + 3 + \\dots + (n - 1) + 2(n - 1) = \\frac{(n '
          '- 1)n}{2} + 2n - 2 = \\frac{n^2 + 3n - 4}{2},\\]so \\[f(n) = \\frac{n^2 + 3n - '
          '2}{2}\\]for all positive integers $n.$ Setting $x = -n$ and $y = n,$ where $n$ is a '
          'positive integer, we get \\[f(-n) + f(n) = f(0) + n^2 - 1.\\]Then \\[f(-n) = n^2 - f(n) '
          '+ f(0) - 1 = n^2 - \\frac{n^2 + 3n - 2}{2} - 2 = \\frac{n^2 - 3n - 2}{2}.\\]Thus, the '
          'formula \\[f(n) = \\frac{n^2 + 3n - 2}{2}\\]holds for all integers $n.$ We want to '
          'solve $f(n) = n,$ or \\[\\frac{n^2 + 3n - 2}{2} = n.\\]Then $n^2 + 3n - 2 = 2n,$ or '
          '$n^2 + n - 2 = 0.$ This factors as $(n - 1)(n + 2) = 0,$ so the solutions are $n = '
          '\\boxed{1,-2}.$',
  'pred': '<think> Okay, so I have this functional equation to solve: \\( f(x) + f(y) = f(x + y) - '
          "xy - 1 \\), and I'm given that \\( f(1) = 1 \\). I need to find all integers \\( n \\) "
          'such that \\( f(n) = n \\). Hmm, functional equations can sometimes be tricky, but '
          'maybe I can figure this out step by step. First, let me see if I can find an expression '
          'for \\( f(x) \\). Maybe by plugging in specific values for \\( x \\) and \\( y \\), I '
          'can get some information about \\( f \\). Let me try setting both \\( x \\) and \\( y '
          '\\) to 0. That often simplifies things. So if \\( x = 0 \\) and \\( y = 0 \\), then the '
          "equation becomes: \\( f(0) + f(0) = f(0 + 0) - 0 * 0 - 1 \\) Simplifying, that's: \\( "
          '2f(0) = f(0) - 0 - 1 \\) Which simplifies further to: \\( 2f(0) = f(0) - 1 \\) '
          'Subtracting \\( f(0) \\) from both sides: \\( f(0) = -1 \\) Alright, so I found that '
          "\\( f(0) = -1 \\). That's a start. Now, maybe I can set \\( y = 1 \\) because I know "
          "\\( f(1) = 1 \\). Let's set \\( y = 1 \\) and leave \\( x \\) arbitrary. Then we get: "
          '\\( f(x) + f(1) = f(x + 1) - x * 1 - 1 \\) Plugging in \\( f(1) = 1 \\): \\( f(x) + 1 = '
          'f(x + 1) - x - 1 \\) Solving for \\( f(x + 1) \\): \\( f(x + 1) = f(x) + 1 + x + 1 \\) '
          "So, \\( f(x + 1) = f(x) + x + 2 \\) Hmm, that's another recursive relationship. So if I "
          'can express \\( f(x + 1) \\) in terms of \\( f(x) \\), maybe I can find a pattern or a '
          "general expression for \\( f(x) \\). Let me try to unroll this recursion. Let's suppose "
          "I start at some point and iterate this. Let's do that starting from \\( x = 0 \\). "
          'First, when \\( x = 0 \\), as we found earlier, \\( f(0) = -1 \\). Then, \\( f(1) = f(0 '
          '+ 1) = f(0) + 0 + 2 = -1 + 0 + 2 = 1 \\). Well, that checks out because we were given '
          "\\( f(1) = 1 \\). Next, let's find \\( f(2) \\). Using the same recursion, \\( f(2) = "
          'f(1 + 1) = f(1) + 1 + 2 = 1 + 1 + 2 = 4 \\). Similarly, \\( f(3) = f(2 + 1) = f(2) + 2 '
          '+ 2 = 4 + 2 + 2 = 8 \\). Wait a second, let me check that again... So \\( f(3) = f(2) + '
          '2 + 2... \\) So from \\( x = 2 \\), do I add 2? Wait, no—wait, actually, the recursion '
          'is \\( f(x + 1) = f(x) + x + 2 \\). So for \\( x = 2 \\), \\( f(3) = f(2) + 2 + 2 \\). '
          "Yep, that's correct. So continuing... \\( f(4) = f(3 + 1) = f(3) + 3 + 2 = 8 + 3 + 2 = "
          '13 \\) Hmm, so the values so far are: - f(0) = -1 - f(1) = 1 - f(2) = 4 - f(3) = 8 - '
          "f(4) = 13 Wait, let me see if this follows a pattern. Let's list them: n: 0, 1, 2, 3, 4 "
          'f(n): -1, 1, 4, 8, 13 Looking at these numbers, let me compute the differences between '
          'consecutive terms. f(1) - f(0) = 1 - (-1) = 2 f(2) - f(1) = 4 - 1 = 3 f(3) - f(2) = 8 - '
          '4 = 4 f(4) - f(3) = 13 - 8 = 5 Ah, interesting! Each time, the difference increases by '
          '1. So from f(0) to f(1), the difference is 2, then 3, then 4, then 5... So it seems the '
          'differences form an arithmetic sequence starting at 2 with a common difference of 1. If '
          'this pattern continues, perhaps the function can be expressed as a quadratic function. '
          'Let me test that. Let me assume that \\( f(x) \\) is a quadratic function of the form '
          '\\( f(x) = ax^2 + bx + c \\). Then maybe I can find coefficients \\( a \\), \\( b \\), '
          'and \\( c \\) that satisfy the functional equation. Let me write down that assumption: '
          '\\( f(x) = ax^2 + bx + c \\) Now, plugging this into the functional equation: \\( f(x) '
          '+ f(y) = f(x + y) - xy - 1 \\) Substituting, we get: \\( ax^2 + bx + c + ay^2 + by + c '
          "= a(x + y)^2 + b(x + y) + c - xy - 1 \\) Let's simplify both sides. Left side: \\( ax^2 "
          '+ bx + c + ay^2 + by + c = a(x^2 + y^2) + b(x + y) + 2c \\) Right side: \\( a(x + y)^2 '
          '+ b(x + y) + c - xy - 1 = a(x^2 + 2xy + y^2) + b(x + y) + c - xy - 1 \\) Simplify: \\( '
          'a x^2 + 2a xy + a y^2 + b x + b y + c - xy - 1 \\) Now, set left side equal to right '
          'side: \\( a(x^2 + y^2) + b(x + y) + 2c = a x^2 + 2a xy + a y^2 + b x + b y + c - xy - 1 '
          '\\) Let me move all terms to the left side to compare: Left minus right: \\( a(x^2 + '
          'y^2) + b(x + y) + 2c - [a x^2 + 2a xy + a y^2 + b x + b y + c - xy - 1] = 0 \\) '
          'Simplify term by term: First, \\( a x^2 - a x^2 = 0 \\) Similarly, \\( a y^2 - a y^2 = '
          '0 \\) Then, \\( -2a xy \\) because one side has a +0xy and the other has -2a xy Wait, '
          'wait, let me clarify: Original left side terms: \\( a x^2 + a y^2 + b x + b y + 2c \\) '
          'Subtract right side terms: \\( a x^2 + 2a xy + a y^2 + b x + b y + c - xy - 1 \\) So, '
          'subtracting: \\( (a x^2 - a x^2) + (a y^2 - a y^2) + (2c - c) + (b x - b x) + (b y - b '
          'y) -2a xy + xy + 1 = 0 \\) Simplify: 0 + 0 + c -2a xy + xy + 1 = 0 So combine like '
          'terms: c + (-2a + 1)xy + 1 = 0 This must hold for all real numbers x and y. How can the '
          'above equation hold for all x and y? The only way is that each coefficient is zero for '
          'the variables, and the constants sum to zero. So, coefficients: 1. For xy: (-2a + 1) '
          "must be zero. 2. Constants: c + 1 must be zero. So let's write those equations: 1. -2a "
          '+ 1 = 0 => a = 1/2 2. c + 1 = 0 => c = -1 So, from this, I know \\( a = 1/2 \\) and \\( '
          'c = -1 \\). Now, what about \\( b \\)? Let me see, in the left minus right equation, '
          'the coefficients for x and y have canceled out because both sides have terms with \\( b '
          "x \\) and \\( b y \\), subtracting each other. So, there's no need to set anything for "
          '\\( b \\)? Wait, do I have any equation involving \\( b \\)? It seems in the difference '
          'between the left and right sides, the terms involving \\( b x \\) and \\( b y \\) have '
          'canceled each other out, meaning there is no condition on \\( b \\) from that step. So, '
          'from this examination, it seems that my initial assumption of \\( f(x) = ax^2 + bx + c '
          '\\) with \\( a = 1/2 \\), \\( c = -1 \\), and \\( b \\) is still free. Wait, but maybe '
          'we can get another condition using \\( f(1) = 1 \\). Given that \\( f(1) = 1 \\), and '
          'our general form is \\( f(x) = \\frac{1}{2}x^2 + b x - 1 \\). So, \\( f(1) = '
          '\\frac{1}{2}(1)^2 + b (1) - 1 = \\frac{1}{2} + b - 1 = b - \\frac{1}{2} \\) Given that '
          '\\( f(1) = 1 \\), set up the equation: \\( b - \\frac{1}{2} = 1 \\Rightarrow b = 1 + '
          '\\frac{1}{2} = \\frac{3}{2} \\) So, thus, the function can be written as: \\( f(x) = '
          '\\frac{1}{2}x^2 + \\frac{3}{2}x - 1 \\) Let me write that more neatly: \\( f(x) = '
          '\\frac{1}{2}x^2 + \\frac{3}{2}x - 1 \\) Simplify: \\( f(x) = \\frac{1}{2}x^2 + '
          "\\frac{3}{2}x - 1 \\) Well, let's verify if this satisfies the original functional "
          'equation to make sure. Compute \\( f(x) + f(y) \\): \\( \\frac{1}{2}x^2 + \\frac{3}{2}x '
          '- 1 + \\frac{1}{2}y^2 + \\frac{3}{2}y - 1 \\) Simplify: \\( \\frac{1}{2}(x^2 + y^2) + '
          '\\frac{3}{2}(x + y) - 2 \\) Compare with \\( f(x + y) - xy - 1 \\): First, compute \\( '
          'f(x + y) \\): \\( \\frac{1}{2}(x + y)^2 + \\frac{3}{2}(x + y) - 1 \\) Expand: \\( '
          '\\frac{1}{2}(x^2 + 2xy + y^2) + \\frac{3}{2}(x + y) - 1 \\) Which is: \\( '
          '\\frac{1}{2}x^2 + xy + \\frac{1}{2}y^2 + \\frac{3}{2}x + \\frac{3}{2}y - 1 \\) Subtract '
          '\\( xy + 1 \\): \\( f(x + y) - xy -1 = \\frac{1}{2}x^2 + xy + \\frac{1}{2}y^2 + '
          '\\frac{3}{2}x + \\frac{3}{2}y - 1 - xy - 1 \\) Simplify: \\( \\frac{1}{2}x^2 + '
          '\\frac{1}{2}y^2 + \\frac{3}{2}x + \\frac{3}{2}y - 2 \\) So, \\( f(x + y) - xy - 1 = '
          '\\frac{1}{2}(x^2 + y^2) + \\frac{3}{2}(x + y) - 2 \\), which is exactly equal to \\( '
          'f(x) + f(y) \\). Therefore, plugging in, it does satisfy the equation. So, that looks '
          'good. So we now have an expression for \\( f(x) \\): \\( f(x) = \\frac{1}{2}x^2 + '
          '\\frac{3}{2}x - 1 \\) Simplify this further if possible: Combine terms: \\( f(x) = '
          "\\frac{x^2 + 3x - 2}{2} \\) Alternatively, it's a quadratic function. Now, I need to "
          'find all integers \\( n \\) such that \\( f(n) = n \\). So set: \\( f(n) = n \\) Which '
          'is: \\( \\frac{n^2 + 3n - 2}{2} = n \\) Multiply both sides by 2: \\( n^2 + 3n - 2 = 2n '
          '\\) Bring all terms to one side: \\( n^2 + 3n - 2 - 2n = 0 \\) Simplify: \\( n^2 + n - '
          "2 = 0 \\) That's a quadratic equation. Let me solve it. Quadratic equation: \\( n^2 + n "
          '- 2 = 0 \\) Using the quadratic formula: \\( n = \\frac{-b \\pm \\sqrt{b^2 - 4ac}}{2a} '
          '\\), where \\( a = 1 \\), \\( b = 1 \\), \\( c = -2 \\). Compute discriminant: \\( 1^2 '
          '- 4*1*(-2) = 1 + 8 = 9 \\) So, \\( n = \\frac{-1 \\pm \\sqrt{9}}{2} = \\frac{-1 \\pm '
          '3}{2} \\) Therefore, 1. \\( n = \\frac{-1 + 3}{2} = \\frac{2}{2} = 1 \\) 2. \\( n = '
          '\\frac{-1 - 3}{2} = \\frac{-4}{2} = -2 \\) So the solutions are \\( n = 1 \\) and \\( n '
          '= -2 \\). Wait, but these are the integer solutions. So the integers n for which \\( '
          'f(n) = n \\) are 1 and -2. Wait, let me double-check with our function \\( f(n) \\): '
          'Given \\( f(x) = \\frac{x^2 + 3x - 2}{2} \\), let me plug in 1: \\( f(1) = \\frac{1 + 3 '
          '- 2}{2} = \\frac{2}{2} = 1 \\). Correct, since \\( f(1) = 1 \\) was given. Now, plug in '
          '-2: \\( f(-2) = \\frac{(-2)^2 + 3*(-2) - 2}{2} = \\frac{4 - 6 - 2}{2} = \\frac{-4}{2} = '
          '-2 \\). So, indeed, \\( f(-2) = -2 \\). Looking back at the pattern we saw earlier: We '
          'found in the functional equation \\( f(0) = -1 \\), \\( f(1) = 1 \\), \\( f(2) = 4 \\), '
          '\\( f(3) = 8 \\), \\( f(4) = 13 \\)... These are all positive integers only at integers '
          '1, 4, 8, 13... But, wait, in our case, the only integer solutions where \\( f(n) = n '
          '\\) is at 1 and -2. Wait, let me check with another integer, 2: \\( f(2) = 4 \\), so '
          "that's \\( f(2) = 4 \\), which is 4, which is not equal to 2. So n=2 is not a solution. "
          'Similarly, n=3: \\( f(3) = 8 \\neq 3 \\), n=4: \\( f(4)=13 \\neq 4 \\), etc. What about '
          "negative integers? We saw n=-2: f(-2)= -2. So, that's a fixed point. What about n=-1: "
          '\\( f(-1) = \\frac{(-1)^2 + 3*(-1) - 2}{2} = \\frac{1 - 3 - 2}{2} = \\frac{-4}{2} = -2 '
          '\\neq -1 \\). n=-3: \\( f(-3) = \\frac{9 + (-9) -2 }{2} = \\frac{-2}{2}= -1 \\neq -3 '
          '\\). n=-4: \\( f(-4) = \\frac{16 + (-12) - 2 }{2} = \\frac{2}{2}= 1 \\neq -4 \\). Hmmm, '
          'so n=-2 is a solution. So the only integers n where f(n) = n are n =1 and n=-2. '
          'Therefore, the integers are 1 and -2. Wait, but let me think again—is that all? Because '
          'sometimes functional equations can have more solutions unless restricted. But in this '
          'case, since we derived the general solution of the function, which is quadratic, '
          'solving \\(f(n) = n\\) gives only quadratic equation, which has at most two solutions '
          '(and indeed we found two solutions). So, there are exactly two integers: 1 and -2. '
          'Wait, so I think I can be confident the solutions are 1 and -2. **Final Answer** The '
          'integers are \\boxed{-2} and \\boxed{1}. </think> Given the functional equation: \\[ '
          'f(x) + f(y) = f(x + y) - xy - 1 \\] for all real numbers \\( x \\) and \\( y \\), and '
          'knowing that \\( f(1) = 1 \\), we need to find all integers \\( n \\) such that \\( '
          'f(n) = n \\). First, by setting \\( x = 0 \\) and \\( y = 0 \\), we find: \\[ 2f(0) = '
          'f(0) - 1 \\implies f(0) = -1. \\] Next, setting \\( y = 1 \\) in the functional '
          'equation, we get: \\[ f(x) + f(1) = f(x + 1) - x - 1. \\] Given \\( f(1) = 1 \\), this '
          'simplifies to: \\[ f(x + 1) = f(x) + x + 2. \\] Using this recursive relationship, we '
          'calculate the values of \\( f \\) at several points: \\[ f(1) = 1, \\] \\[ f(2) = 4, '
          '\\] \\[ f(3) = 8, \\] \\[ f(4) = 13. \\] We observe that the differences between '
          'consecutive values form an arithmetic sequence starting from 2 and increasing by 1 each '
          'time. This suggests that \\( f(x) \\) might be a quadratic function. Assuming \\( f(x) '
          '\\) is quadratic, we write it as: \\[ f(x) = ax^2 + bx + c. \\] Substituting this into '
          'the functional equation and equating coefficients, we find: \\[ a = \\frac{1}{2}, \\] '
          '\\[ c = -1, \\] and using \\( f(1) = 1 \\), we determine: \\[ b = \\frac{3}{2}. \\] '
          'Thus, the quadratic function is: \\[ f(x) = \\frac{1}{2}x^2 + \\frac{3}{2}x - 1. \\] To '
          'find all integers \\( n \\) such that \\( f(n) = n \\), we solve: \\[ \\frac{n^2 + 3n - '
          '2}{2} = n. \\] This simplifies to: \\[ n^2 + n - 2 = 0. \\] Solving this quadratic '
          'equation, we find the roots: \\[ n = 1 \\quad \\text{and} \\quad n = -2. \\] Thus, the '
          'integers \\( n \\) such that \\( f(n) = n \\) are: \\[ \\boxed{-2} \\quad \\text{and} '
          '\\quad \\boxed{1}. \\]',
  'expected': True},
 {'src': ['mv:test_all.py::test_set_rel_assymetry[1]', 'mv:test_all.py::test_set_rel_assymetry[0]'],
  'gold': '$-2 \\\\le x \\\\le 7$',
  'pred': '$x \\in [-2,7]$',
  'expected': True,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_set_rel_assymetry[2]'],
  'gold': '$x \\in [-2,7]$',
  'pred': '$-2 \\\\le x \\\\le 7$',
  'expected': True,
  'match_types': ['latex'],
  'skip': 'allow_set_relation_comp=True is a non-default math-verify option we do not offer'},
 {'src': ['mv:test_all.py::test_set_rel_assymetry[3]'],
  'gold': '$x \\in [-2,7]$',
  'pred': '$-2 \\\\le x \\\\le 7$',
  'expected': False,
  'match_types': ['latex']},
 {'src': ['mv:test_all.py::test_float_precision[0]'],
  'gold': '4.123105625617661',
  'pred': '$\\sqrt{17}$',
  'expected': True,
  'precision': 5},
 {'src': ['mv:test_all.py::test_sqrt_precision[0]'],
  'gold': '$4$',
  'pred': '$4\\sqrt{2}$',
  'expected': False,
  'precision': 5},
 {'src': ['mv:test_all.py::test_symbols[0]'],
  'gold': '$\text{13}$',
  'pred': '$13$',
  'expected': False,
  'precision': 5},
 {'src': ['mv:test_boxed.py::test_boxed[0]'],
  'gold': '$\\\\boxed{35 cm} ++++++ \\\\boxed{4}$',
  'pred': '${35 cm,4}$',
  'expected': True},
 {'src': ['mv:test_boxed.py::test_boxed[1]'],
  'gold': ' the answer should be \\\\boxed{004}.\\n\\nBut let me check again: the sum is '
          '2,552,004. The last three digits are 004. Therefore, when divided by 1000, the '
          'remainder is 004. So, \\\\boxed{004} is the correct answer.\\n\\n**Final '
          'Answer**\\n\\\\boxed{004}',
  'pred': '$004$',
  'expected': True},
 {'src': ['mv:test_boxed.py::test_boxed[2]'],
  'gold': 'SoHi YES.\\n\\n could answer therefore\\\\boxed{840}.,but let me put this after '
          'explain.\\n\\n**Final Answer**\\n\\\\boxed{840}',
  'pred': '$840$',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[0]',
          'mv:test_numina_cases.py::test_numina_cases[19]',
          'lv:test_extractive_match.py::test_math_numina_cases[0]',
          'lv:test_extractive_match.py::test_math_numina_cases[19]'],
  'gold': '$(37,3,3,13),(17,3,3,7),(3,37,3,13),(3,17,3,7),(3,3,2,3)$',
  'pred': '$\\boxed{(3, 37, 3, 13), (3, 17, 3, 7), (3, 3, 2, 3), (3,17,3,7), (17,3,3,7), '
          '(37,3,3,13)}$',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[1]',
          'lv:test_extractive_match.py::test_math_numina_cases[1]'],
  'gold': '$(p,q)=(3,2)$',
  'pred': '$(3,2)$',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[2]',
          'lv:test_extractive_match.py::test_math_numina_cases[2]'],
  'gold': '$(0;0;0),(0;-2;0),(0;0;6),(0;-2;6),(4;0;0),(4;-2;0),(4;0;6),(4;-2;6)$',
  'pred': '\\boxed{(4, 0, 6), (4, -2, 6), (0, 0, 6), (0, -2, 6), (4, 0, 0), (4, -2, 0), (0, 0, 0), '
          '(0, -2, 0)}',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[3]',
          'lv:test_extractive_match.py::test_math_numina_cases[3]'],
  'gold': '$1\\leq|z|\\leq \\frac{3}{2}$',
  'pred': '$z \\in \\left[-\\frac{3}{2}, -1\\right] \\cup \\left[1, \\frac{3}{2}\\right]$',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[4]',
          'lv:test_extractive_match.py::test_math_numina_cases[4]'],
  'gold': '$-12;-11;-10;-8;-7;-6$',
  'pred': '$\\boxed{\\{-12, -11, -10, -8, -7, -6\\}}$',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[5]',
          'lv:test_extractive_match.py::test_math_numina_cases[5]'],
  'gold': '$AB=4,CD=5$',
  'pred': '$\\boxed{4, 5}$',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[6]',
          'lv:test_extractive_match.py::test_math_numina_cases[6]'],
  'gold': '$(11,7)or(7,11)$',
  'pred': '$\\boxed{(7,11),\\ (11,7)}$',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[7]',
          'lv:test_extractive_match.py::test_math_numina_cases[7]'],
  'gold': '$S_{MBCN}:S=7:32$',
  'pred': '$\\boxed{7:32}$',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[8]',
          'lv:test_extractive_match.py::test_math_numina_cases[8]'],
  'gold': '$\\frac{NO}{BO}=\\frac{1}{\\sqrt{6}}$',
  'pred': '$\\frac{1}{\\sqrt{6}}$',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[9]',
          'lv:test_extractive_match.py::test_math_numina_cases[9]'],
  'gold': '$p=5,q=2;p=7,q=2$',
  'pred': '$(5,2),(7,2)$',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[10]',
          'lv:test_extractive_match.py::test_math_numina_cases[10]'],
  'gold': '$(p,q,r)=(3,2,7)$',
  'pred': '$(3,2,7)$',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[11]',
          'lv:test_extractive_match.py::test_math_numina_cases[11]'],
  'gold': '$V_{1}:V_{2}=11:21$',
  'pred': '$11:21$',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[12]',
          'lv:test_extractive_match.py::test_math_numina_cases[12]'],
  'gold': '$(2,1),(1,2),(-1,-20),(-20,-1)$',
  'pred': 'solutions are:\n'
          '\n'
          '\\[\n'
          '\\boxed{(1, 2)}, \\boxed{(2, 1)}, \\boxed{(-1, -20)}, \\boxed{(-20, -1)}\n'
          '\\]',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[13]',
          'lv:test_extractive_match.py::test_math_numina_cases[13]'],
  'gold': '\\(\\boxed{1}\\) and \\(\\boxed{-2}\\).',
  'pred': '$\\boxed{-2,1}$.',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[14]',
          'lv:test_extractive_match.py::test_math_numina_cases[14]'],
  'gold': '$\\text{odd}$',
  'pred': '$odd$',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[15]',
          'lv:test_extractive_match.py::test_math_numina_cases[15]'],
  'gold': '$\\text{e}$',
  'pred': '$e$',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[17]',
          'lv:test_extractive_match.py::test_math_numina_cases[17]'],
  'gold': '$d$',
  'pred': '$\\text{E}$',
  'expected': False},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[18]',
          'lv:test_extractive_match.py::test_math_numina_cases[18]'],
  'gold': '$1$ and $2$ and $3$',
  'pred': '$\\boxed{1,2,3}$',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[20]',
          'lv:test_extractive_match.py::test_math_numina_cases[20]'],
  'gold': '$(37,3,3),(17,3,3,7),(3,37,3,13),(3,17,3,7),(3,3,2,3)$',
  'pred': '$\\boxed{(3, 37, 3, 13), (3, 17, 3, 7), (3, 3, 2, 3), (3,17,3,7), (17,3,3,7), '
          '(37,3,3,13)}$',
  'expected': False},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[21]',
          'lv:test_extractive_match.py::test_math_numina_cases[21]'],
  'gold': '$(p,q)=(3,2)$',
  'pred': '$\\boxed{(3, 2)}$',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[22]',
          'lv:test_extractive_match.py::test_math_numina_cases[22]'],
  'gold': '\\boxed{x = -5,\\ p = \\frac{14}{3}} ',
  'pred': '$\\boxed{-5, \\frac{14}{3}}$',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[23]',
          'lv:test_extractive_match.py::test_math_numina_cases[23]'],
  'gold': '\\boxed{a=4,\\,-8,\\,-10}',
  'pred': '$\\boxed{-10,-8,4}$',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[24]',
          'lv:test_extractive_match.py::test_math_numina_cases[24]'],
  'gold': '\\\\boxed{W(n) = 1 \\\\text{ and } W(n) = -1',
  'pred': 'W(x)=1orW(x)=-1',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[25]',
          'lv:test_extractive_match.py::test_math_numina_cases[25]'],
  'gold': '$21,16$ or $11$',
  'pred': '$21,16,11$',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[26]',
          'lv:test_extractive_match.py::test_math_numina_cases[27]'],
  'gold': '\\n\\n\\[ \\boxed{p = -1 \\text{ and } p = \\dfrac{15}{8}} \\]',
  'pred': '$p=-1,p=\\frac{15}{8}$',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[27]',
          'lv:test_extractive_match.py::test_math_numina_cases[28]'],
  'gold': '$0<f(x)<1$',
  'pred': '$(0,1)$',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[28]',
          'lv:test_extractive_match.py::test_math_numina_cases[29]'],
  'gold': '\\(\\boxed{6 \\text{ and } 8}\\)',
  'pred': '$\\boxed{6,8}$',
  'expected': True},
 {'src': ['mv:test_numina_cases.py::test_numina_cases[29]',
          'lv:test_extractive_match.py::test_math_numina_cases[30]'],
  'gold': '$\\text{Even}$',
  'pred': '$Even$',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[0]'],
  'gold': '$$\\boxed{2}, \\boxed{3}, \\boxed{5}, \\boxed{7}, \\boxed{13}$$',
  'pred': '$${2, 3, 5, 7, 13}$$',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[1]'],
  'gold': '$$f(y) = y$$',
  'pred': '$$f(y) = y$$',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[2]'],
  'gold': '$$-793 < a < 10$$',
  'pred': '$$(-793, 10)$$',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[3]'],
  'gold': '$$\\text{The midpoints form a regular hexagon}$$',
  'pred': '$$\\text{The midpoints form a regular hexagon}$$',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[4]'],
  'gold': '$$a_3 = 2, a_{37} = 19$$',
  'pred': '$$\\boxed{a_{37} = 19, \\quad a_3 = 2}$$',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[5]'],
  'gold': '$$(2, 2), (1, 3), (3, 3)$$',
  'pred': '$$\\boxed{(2, 2), (1, 3), (3, 3)}$$',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[6]'],
  'gold': '$$(1, +\\infty)$$',
  'pred': '$$(1, +\\infty)$$',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[7]'],
  'gold': '$$x = \\frac{1}{2}, x = \\frac{-1 \\pm \\sqrt{13}}{4}$$',
  'pred': '$$\\boxed{x = \\frac{1}{2}, x = \\frac{-1 \\pm \\sqrt{13}}{4}}$$',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[8]'],
  'gold': '$$0.06 \\text{ yuan}$$',
  'pred': '$$\\boxed{0.06 \\text{ yuan}}$$',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[9]'],
  'gold': '$$(5, 8), (8, 5)$$',
  'pred': '$$\\boxed{(x, y) = (5, 8) \\quad \\text{and} \\quad (8, 5)}$$',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[10]'],
  'gold': '$$667$$',
  'pred': '$$\\boxed{667}$$',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[11]'],
  'gold': '$$6 \\text{ and } 8$$',
  'pred': '$$\\boxed{6 \\text{ and } 8}$$',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[12]'],
  'gold': '$$(2, 2), (6, 2)$$',
  'pred': '$$\\boxed{(2, 2)} \\quad \\text{and} \\quad \\boxed{(6, 2)}$$',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[13]'],
  'gold': '$$(98, 2), (99, 503)$$',
  'pred': '$$\\boxed{(98, 2)} \\quad \\text{and} \\quad \\boxed{(99, 503)}$$',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[14]'],
  'gold': '$$(3, 3), (1, 1)$$',
  'pred': '$$\\boxed{(3, 3)} \\text{ for part (a) and } \\boxed{(1, 1)}$$',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[15]'],
  'gold': '$$k \\ge 2$$',
  'pred': '$$\\boxed{k \\ge 2}$$',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[16]'],
  'gold': '$$k = 45, n = 2$$',
  'pred': '$$\\boxed{k = 45} \\quad \\text{and} \\quad \\boxed{n = 2}$$',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[17]'],
  'gold': '$143$',
  'pred': '<think> Alright, let me try to figure out this problem. So, we need to find how many '
          'years between 2000 and 3000 inclusive can be written as the sum of two positive '
          'integers p and q such that 2p = 5q. The example given is 2016 = 1440 + 576, where '
          '2*1440 = 2880 and 5*576 = 2880, so they are equal. First, I need to understand the '
          'relationship between p and q. The equation 2p = 5q implies that p and q are in a '
          "specific ratio. Let's solve for one variable in terms of the other. If 2p = 5q, then p "
          '= (5/2)q. That means p has to be a multiple of 5/2 times q. Since p and q are positive '
          "integers, q must be a multiple of 2 to make p an integer. Let's denote q = 2k, where k "
          'is a positive integer. Then p = (5/2)*(2k) = 5k. So, substituting back, the year can be '
          'written as p + q = 5k + 2k = 7k. Therefore, the year must be a multiple of 7. Wait, so '
          'that simplifies things. If the year must be a multiple of 7, then the problem reduces '
          'to finding how many multiples of 7 are there between 2000 and 3000 inclusive. But let '
          'me double-check this reasoning. Starting from 2p = 5q, we have p = (5/2)q. Since p must '
          'be an integer, q must be even. Let q = 2k, then p = 5k. So, the sum p + q = 5k + 2k = '
          '7k. Therefore, every year that is a multiple of 7 can be expressed in such a way. '
          'Conversely, if a year is a multiple of 7, say N = 7k, then we can set q = 2k and p = '
          '5k, which are integers. So, yes, the problem is equivalent to finding the number of '
          'multiples of 7 between 2000 and 3000 inclusive. Therefore, I need to count how many '
          'numbers divisible by 7 are in the range [2000, 3000]. To do this, I can find the '
          'smallest multiple of 7 in this range and the largest multiple of 7, then compute how '
          'many terms are in this arithmetic sequence. Let me first find the smallest multiple of '
          '7 greater than or equal to 2000. Dividing 2000 by 7: 2000 ÷ 7 ≈ 285.714. So, 285 * 7 = '
          '1995, which is less than 2000. The next multiple is 286 * 7 = 2002. Therefore, 2002 is '
          'the first multiple of 7 in the range. Now, the largest multiple of 7 less than or equal '
          'to 3000. Dividing 3000 by 7: 3000 ÷ 7 ≈ 428.571. So, 428 * 7 = 2996. But 428*7=2996, '
          'which is less than 3000. The next multiple would be 429*7=3003, which is over 3000. So, '
          'the largest multiple is 2996. Now, the number of terms in the arithmetic sequence from '
          '2002 to 2996, with common difference 7. The formula for the number of terms in an '
          'arithmetic sequence is ((last term - first term)/common difference) + 1. So, ((2996 - '
          '2002)/7) + 1 = (994/7) + 1. Let me compute 994 divided by 7. 7*142=994. So, 142 + 1 = '
          '143. Therefore, there are 143 multiples of 7 between 2000 and 3000 inclusive. But wait, '
          'let me confirm. If we have terms starting at 2002, each term 7 apart, up to 2996. The '
          'difference between 2996 and 2002 is 994. Dividing by 7 gives 142, which means there are '
          '142 intervals of 7, hence 143 terms. That seems right. But let me check with another '
          'method. The number of multiples of 7 up to n is floor(n/7). So, the number of multiples '
          'up to 3000 is floor(3000/7)=428, as 7*428=2996. The number of multiples up to 1999 is '
          'floor(1999/7)=285, since 7*285=1995. So, the number of multiples between 2000 and 3000 '
          'inclusive is 428 - 285. But wait, 428 counts up to 2996, which is within 3000. However, '
          '285 counts up to 1995, so the next multiple is 2002. So, the number of multiples from '
          '2002 to 2996 is 428 - 285 = 143. But wait, 428 - 285 = 143? Let me compute 428 - 285. '
          "428 - 200 = 228, 228 - 85 = 143. Yes. So that's 143. However, is 2002 included? Because "
          '285 counts up to 1995, so 1995 is the 285th multiple, then the next one is 2002 which '
          'is 286th. So, from 286th to 428th multiple, how many terms? 428 - 286 + 1 = 143. Yes, '
          'because (428 - 286) = 142, plus 1 is 143. So that confirms the answer is 143. But wait, '
          'the problem states \\"between 2000 and 3000 inclusive\\". However, 2002 is the first '
          'multiple of 7 in that range. So, if we need to include 2000, but 2000 is not a multiple '
          'of 7, so the count remains 143. Therefore, the answer is 143. But let me check the '
          'example given. 2016 is in the range. 2016 divided by 7 is 288, so 2016 is the 288th '
          'multiple of 7. So, 288 - 285 = 3, but according to the previous count, 428 - 285 = 143. '
          'But 2016 is within the range. So, perhaps my initial calculation is correct. Wait, 428 '
          '- 285 = 143. But if the first multiple is 2002 (286th multiple), and the last is 2996 '
          '(428th multiple), then the number of terms is 428 - 286 + 1 = 143. So, yes. So, 143 is '
          'the answer. Wait, but let me test with smaller numbers. Suppose between 7 and 14 '
          'inclusive. How many multiples of 7? 7,14. So two numbers. Applying the formula: '
          'floor(14/7)=2, floor(6/7)=0, so 2-0=2. Correct. Similarly, between 15 and 21. The '
          'multiples are 21. So floor(21/7)=3, floor(14/7)=2, 3-2=1. Correct. So, the formula '
          'works when the upper bound is a multiple. If upper bound is not a multiple, like '
          'between 15 and 20. The multiples are 21 is beyond, so 14 is the last multiple below 20. '
          'Wait, no, 14 is 14, 21 is 21. Wait, between 15 and 20, there are no multiples of 7. So '
          'floor(20/7)=2, floor(14/7)=2, 2-2=0. Correct. So, formula works. So in the original '
          'problem, floor(3000/7)=428, floor(1999/7)=285. So, 428-285=143. Therefore, the answer '
          'is 143. But wait, the example given is 2016, which is 7*288. So, 288 is within the 286 '
          "to 428 range. 288-285=3, but in the total count, it's 143. So, all multiples from 2002 "
          'up to 2996. So, 143 years. Therefore, the answer is 143. So, \\boxed{143} **Final '
          'Answer** \\boxed{143} </think> To determine how many years between 2000 and 3000 '
          'inclusive can be written as the sum of two positive integers \\( p \\) and \\( q \\) '
          'such that \\( 2p = 5q \\), we start by analyzing the relationship between \\( p \\) and '
          '\\( q \\). Given \\( 2p = 5q \\), we can express \\( p \\) in terms of \\( q \\): \\( p '
          '= \\frac{5}{2}q \\). For \\( p \\) and \\( q \\) to be integers, \\( q \\) must be a '
          'multiple of 2. Let \\( q = 2k \\), then \\( p = 5k \\). The sum \\( p + q = 5k + 2k = '
          '7k \\), indicating the year must be a multiple of 7. Next, we need to count the '
          'multiples of 7 between 2000 and 3000 inclusive. 1. **Finding the smallest multiple of 7 '
          '≥ 2000**: \\[ \\left\\lceil \\frac{2000}{7} \\right\\rceil = 286 \\quad \\text{(since } '
          '286 \\times 7 = 2002\\text{)} \\] 2. **Finding the largest multiple of 7 ≤ 3000**: \\[ '
          '\\left\\lfloor \\frac{3000}{7} \\right\\rfloor = 428 \\quad \\text{(since } 428 \\times '
          '7 = 2996\\text{)} \\] 3. **Counting the number of multiples of 7 between 2002 and '
          '2996**: \\[ \\text{Number of terms} = 428 - 286 + 1 = 143 \\] Thus, the number of years '
          'between 2000 and 3000 inclusive that can be written as the sum of two positive integers '
          '\\( p \\) and \\( q \\) such that \\( 2p = 5q \\) is \\(\\boxed{143}\\).',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[18]'],
  'gold': '$${1,2,3}$$',
  'pred': '\\boxed{1} and \\boxed{2} and \\boxed{3}',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[19]'],
  'gold': '$${1,2,3}$$',
  'pred': '\\boxed{1},\\boxed{2},\\boxed{3}',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[20]'],
  'gold': '$$|AB|=1$$',
  'pred': '$$1$$',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[21]'],
  'gold': '$$A:B=1$$',
  'pred': '$$1$$',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[22]'],
  'gold': '$$f(x)=1$$',
  'pred': '$$1$$',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[23]',
          'mv:test_open_thoughts.py::test_open_thoughts[26]',
          'lv:test_extractive_match.py::test_math_numina_cases[31]',
          'lv:test_extractive_match.py::test_math_numina_cases[34]'],
  'gold': '$x_{1}=10^{\\frac{-5+\\sqrt{13}}{6}},\\quadx_{2}=10^{\\frac{-5-\\sqrt{13}}{6}}$',
  'pred': '$\\boxed{10^{\\frac{\\sqrt{13} - 5}{6}}} \\quad \\text{and} \\quad '
          '\\boxed{10^{-\\frac{5 + \\sqrt{13}}{6}}}$',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[24]',
          'lv:test_extractive_match.py::test_math_numina_cases[32]'],
  'gold': '$y_{1}=-2 x^{2}+4 x+3, y_{2}=3 x^{2}+12 x+10$',
  'pred': '\\($y_1 = \\boxed{-2(x - 1)^2 + 5} \\) and \\( y_2 = \\boxed{3(x + 2)^2 - 2} \\) ',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[25]',
          'lv:test_extractive_match.py::test_math_numina_cases[33]'],
  'gold': '$x_{1}=\\frac{1}{2}+\\frac{31\\sqrt{5}}{216},\\quadx_{2}=\\frac{1}{2}-\\frac{31\\sqrt{5}}{216}$',
  'pred': '$\\boxed{\\dfrac{108 + 31\\sqrt{5}}{216}} \\quad \\text{and} \\quad \\boxed{\\dfrac{108 '
          '- 31\\sqrt{5}}{216}}$',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[27]'],
  'gold': '\\boxed{1} papers and \\boxed{2} bins',
  'pred': '$\\boxed{1,2}$',
  'expected': True},
 {'src': ['mv:test_open_thoughts.py::test_open_thoughts[28]'],
  'gold': '\\boxed{1} no no no no no \\boxed{2}',
  'pred': '$\\boxed{1,2}$',
  'expected': False},
 {'src': ['mv:test_strict.py::test_strict_variable_comparison[0]'],
  'gold': '$f(x)$',
  'pred': '$f(y)$',
  'expected': False},
 {'src': ['mv:test_strict.py::test_strict_variable_comparison[1]'],
  'gold': '$f(x)$',
  'pred': '$f(y)$',
  'expected': True,
  'skip': 'strict=False (variables compared up to renaming) is a math-verify option we do not '
          'offer'},
 {'src': ['mv:test_yujianll.py::test_string_extraction[0]'],
  'gold': '$n=1, 2, 3$',
  'pred': '$n=1, 2, 3$',
  'expected': True},
 {'src': ['mv:test_yujianll.py::test_string_extraction[1]'],
  'gold': '$n=2, 3, 4$',
  'pred': '$n=1, 2, 3$',
  'expected': False},
 {'src': ['mv:test_yujianll.py::test_string_extraction[2]'],
  'gold': '$D = (0, 1)$',
  'pred': '$D = (0, 1)$',
  'expected': True},
 {'src': ['mv:test_yujianll.py::test_string_extraction[3]'],
  'gold': '$D = (0, 1)$',
  'pred': '$D = (0, 1.5)$',
  'expected': False},
 {'src': ['mv:test_yujianll.py::test_string_extraction[4]'],
  'gold': '$F_n = \\sum_{k=0}^{n-1} F_k F_{n-k-1}$',
  'pred': '$F_n = \\sum_{k=0}^{n-2} F_k F_{n-k-2}$',
  'expected': False},
 {'src': ['mv:test_yujianll.py::test_string_extraction[5]'],
  'gold': '$F_n = \\sum_{k=0}^{n-1} F_k F_{n-k-1}$',
  'pred': '$F_n = \\sum_{k=0}^{n-1} F_{n-k-1} F_k$',
  'expected': True},
 {'src': ['mv:test_yujianll.py::test_string_extraction[6]'],
  'gold': '$19, 46, and 82$',
  'pred': '$19, 46, \\text{ and } 82$',
  'expected': True},
 {'src': ['mv:test_yujianll.py::test_string_extraction[7]'],
  'gold': '$19, 46, and 82$',
  'pred': '$21, 36, and 82$',
  'expected': False},
 {'src': ['mv:test_yujianll.py::test_string_extraction[8]'],
  'gold': '$1 - \\frac{1}{\\mathrm{e}}$',
  'pred': '$1 - \\frac{1}{\\mathrm{e}}$',
  'expected': True},
 {'src': ['mv:test_yujianll.py::test_string_extraction[9]'],
  'gold': '$1 - \\frac{1}{\\mathrm{e}}$',
  'pred': '$1 + \\frac{1}{\\mathrm{e}}$',
  'expected': True},
 {'src': ['mv:test_yujianll.py::test_string_extraction[10]'],
  'gold': '$\\pm 2021$',
  'pred': '$2021$',
  'expected': False},
 {'src': ['mv:test_yujianll.py::test_string_extraction[11]'],
  'gold': '$\\pm 2021$',
  'pred': '${-2021, 2021}$',
  'expected': True},
 {'src': ['mv:test_yujianll.py::test_string_extraction[12]'],
  'gold': '$12:00$',
  'pred': '$1:00$',
  'expected': False},
 {'src': ['mv:test_yujianll.py::test_string_extraction[13]'],
  'gold': '$12:00$',
  'pred': '$12:00$',
  'expected': True},
 {'src': ['lv:test_extractive_match.py::test_extraction_abc[0]'],
  'gold': 'C',
  'pred': 'thinking about it I think the correct answer is C',
  'expected': True,
  'mode': 'choice'},
 {'src': ['lv:test_extractive_match.py::test_extraction_abc[1]'],
  'gold': 'B',
  'pred': "Let's think step by step. It's not A because it doesn't make sense, therefore I think "
          "it's B",
  'expected': True,
  'mode': 'choice'},
 {'src': ['lv:test_extractive_match.py::test_extraction_abc[2]'],
  'gold': 'D',
  'pred': "The answer is for sure D, it can't be A or B",
  'expected': True,
  'mode': 'choice'},
 {'src': ['lv:test_extractive_match.py::test_extraction_abc[3]'],
  'gold': 'D',
  'pred': "The answer: D, it doesn't make sense for it to be A or B",
  'expected': True,
  'mode': 'choice'},
 {'src': ['lv:test_extractive_match.py::test_extraction_abc[4]'],
  'gold': 'D',
  'pred': "D. it can't be A or B",
  'expected': True,
  'mode': 'choice'},
 {'src': ['lv:test_extractive_match.py::test_extraction_abc[5]'],
  'gold': '(D) Alina',
  'pred': 'D',
  'expected': True,
  'mode': 'choice'},
 {'src': ['lv:test_extractive_match.py::test_extraction_abc[6]'],
  'gold': '(A) Cecile',
  'pred': 'C',
  'expected': False,
  'mode': 'choice'},
 {'src': ['lv:test_extractive_match.py::test_extraction_abc[7]'],
  'gold': 'C Cecile',
  'pred': 'C',
  'expected': True,
  'mode': 'choice'},
 {'src': ['lv:test_extractive_match.py::test_extraction_abc[8]'],
  'gold': 'Alina and the answer is\n(C) Cecile',
  'pred': 'C',
  'expected': True,
  'mode': 'choice'},
 {'src': ['lv:test_extractive_match.py::test_extraction_abc[9]'],
  'gold': 'Alina and the answer is\nC Cecile',
  'pred': 'C',
  'expected': True,
  'mode': 'choice'},
 {'src': ['lv:test_extractive_match.py::test_extraction_abc[10]'],
  'gold': 'A Peter\nCelina bum',
  'pred': 'A',
  'expected': True,
  'mode': 'choice'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_abc[0]'],
  'gold': 'C',
  'pred': 'réponse est C non A',
  'expected': True,
  'mode': 'choice',
  'language': 'french'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_abc[1]'],
  'gold': 'B',
  'pred': 'B。 不是 A',
  'expected': True,
  'mode': 'choice',
  'language': 'chinese'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_abc[2]'],
  'gold': 'B',
  'pred': 'B。不是 A',
  'expected': True,
  'mode': 'choice',
  'language': 'chinese'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_abc[3]'],
  'gold': 'B',
  'pred': 'B不是 A',
  'expected': True,
  'mode': 'choice',
  'language': 'chinese'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_math[0]'],
  'gold': '13',
  'pred': '首先，我们知道最初有3只鸟和4只鹳鸟坐在篱笆上，所以总共有3 + 4 = 7只鸟和鹳鸟。 然后，又有6只鹳鸟来加入它们，所以鹳鸟的总数变成4 + 6 = 10只。 '
          '因此，现在篱笆上总共有3只鸟（假设鸟的数量没有变化）和10只鹳鸟，所以一共有3 + 10 = 13只鸟和鹳鸟。',
  'expected': True,
  'language': 'chinese'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_math[1]'],
  'gold': '3',
  'pred': '瑞秋的数学作业有5页，阅读作业有2页。 要找出数学作业比阅读作业多多少页，我们可以简单地进行减法运算： 5页（数学作业） - 2页（阅读作业） = 3页 '
          '因此，瑞秋的数学作业比阅读作业多 **3页**。',
  'expected': True,
  'language': 'chinese'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_math[2]'],
  'gold': '858',
  'pred': '要解决这个问题，我们可以按照以下步骤进行： 1. **确定每个袋子里的糖果数量**：弗兰克将糖果放入26个袋子里，每个袋子里有33颗糖果。 2. '
          '**计算总糖果数量**：如果每个袋子里有33颗糖果，那么26个袋子里的糖果总数为：33颗/袋 * 26袋 = 858颗。 因此，弗兰克一共有**858颗**糖果。 ',
  'expected': True,
  'language': 'chinese'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_math[3]'],
  'gold': '192',
  'pred': '让我们一步步来解决这个问题。 我们知道杰西减掉了126公斤，她目前的体重是66公斤。要找到她开始慢跑前的体重，我们只需将她减掉的体重添加到她当前的体重上： '
          '66公斤（当前体重） + 126公斤（减掉的体重） = 192公斤 因此，杰西开始慢跑前的体重是192公斤。 ',
  'expected': True,
  'language': 'chinese'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_math[4]'],
  'gold': '8722',
  'pred': '让我们一步步来解决这个问题。 '
          '我们知道每件T恤的利润是98美元。在阿肯色州比赛和德克萨斯理工大学比赛期间，他们总共卖出了163件T恤。其中，在阿肯色州比赛期间卖出了89件T恤。 '
          '要计算从阿肯色州比赛中卖出的T恤赚的钱，我们只需要将阿肯色州比赛期间卖出的T恤数量乘以每件T恤的利润： 89件T恤 * 98美元/件 = 8722美元 '
          '所以，他们从阿肯色州比赛中卖出的T恤赚了8722美元。 ',
  'expected': True,
  'language': 'chinese'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_math[5]'],
  'gold': '99',
  'pred': '首先，我们知道Haley的班上有11个喜欢玩弹珠的男孩。如果她给每个男孩9颗弹珠，我们可以通过以下步骤计算她总共有多少颗弹珠： 1. '
          '**确定给所有男孩的弹珠数量**：11个男孩 * 9颗弹珠/男孩 = 99颗弹珠 2. **结论**：Haley总共有99颗弹珠。 ',
  'expected': True,
  'language': 'chinese'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_math[6]'],
  'gold': '92',
  'pred': 'لإيجاد ناتج العملية الحسابية 79 * 2 - 66، سنقوم بالخطوات التالية: 1. أولاً، نقوم بضرب '
          '79 في 2: 79 * 2 = 158 2. ثم نطرح 66 من النتيجة السابقة: 158 - 66 = 92 لذا، ناتج العملية '
          'الحسابية 79 * 2 - 66 هو **92**.',
  'expected': True,
  'language': 'arabic'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_math[7]'],
  'gold': '66',
  'pred': 'لإيجاد ناتج العملية الحسابية 55 * 3 - 99، سنقوم بالخطوات التالية: 1. أولاً، نقوم بضرب '
          '55 في 3: 55 * 3 = 165 2. ثم نطرح 99 من النتيجة السابقة: 165 - 99 = 66 لذا، ناتج العملية '
          'الحسابية 55 * 3 - 99 هو **66**.',
  'expected': True,
  'language': 'arabic'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_math[8]'],
  'gold': '25%',
  'pred': 'Il y a 6 résultats possibles lorsque Jerry lance un dé à six faces : 1, 2, 3, 4, 5, 6. '
          "Pour trouver la probabilité d'obtenir un nombre supérieur à 3, nous comptons les "
          'résultats favorables : 4, 5, 6. Il y a donc 3 résultats favorables. La probabilité '
          "d'obtenir un nombre supérieur à 3 est donc de 3/6, soit 1/2. Pour trouver la "
          'probabilité de ne pas obtenir un nombre pair deux fois de suite, nous devons considérer '
          'les résultats qui ne sont pas des nombres pairs (impairs) : 1, 3, 5. Il y a 3 résultats '
          "impairs sur 6 résultats possibles. La probabilité d'obtenir un nombre impair au premier "
          "lancer est donc de 3/6, soit 1/2. Maintenant, pour qu'il n'y ait pas de nombre pair "
          'deux fois de suite, nous devons multiplier les probabilités de chaque lancer : (1/2) * '
          "(1/2) = 1/4 Cela signifie qu'il y a 1 chance sur 4 (25%) que Jerry n'obtienne pas un "
          "nombre pair deux fois de suite lorsqu'il lance le dé. En conclusion, la probabilité que "
          "Jerry obtienne un nombre supérieur à 3 plutôt qu'un nombre pair deux fois de suite est "
          'de **25%**.',
  'expected': True,
  'language': 'french'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_math[9]'],
  'gold': '105',
  'pred': 'réponse est (35 + 70 = 105).',
  'expected': True,
  'language': 'french'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_math[10]'],
  'gold': '79',
  'pred': 'donc 353 g - 79 g = 274 g. Donc, il a déjà 79 g de cire.',
  'expected': True,
  'language': 'french'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_math[11]'],
  'gold': '220',
  'pred': "Réponse: Janeth aura encore 220 $ à payer d'ici 12 mois.",
  'expected': True,
  'language': 'french'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_math[12]'],
  'gold': '70',
  'pred': 'La réduction est de 100 * 0,30 = 30 $. Le coût final est donc de 100 - 30 = 70',
  'expected': True,
  'language': 'french'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_math[13]'],
  'gold': '2/5',
  'pred': '} \\times \\frac{1}{3} = \\frac{6}{15} = \\frac{2}{5} ] 所以，每份应该是 (\\frac{2}{5}) 吨。 '
          '答案：每份应该是 (\\frac{2}{5}) 吨。',
  'expected': True,
  'language': 'chinese'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_math[14]'],
  'gold': '4000',
  'pred': ' 地块面积 = 72000 / 18 = 4000千克',
  'expected': True,
  'language': 'chinese'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_math[15]'],
  'gold': '300',
  'pred': '来计算水池中水的流出时间：12000升/40升/分钟=300分钟。因此，水池中水将在300分钟内被放完。',
  'expected': True,
  'language': 'chinese'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_math[16]'],
  'gold': '13/28',
  'pred': '计划的比例为13/28',
  'expected': True,
  'language': 'chinese'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_math[17]'],
  'gold': '8/46',
  'pred': '\\frac{4}{23}',
  'expected': True,
  'language': 'chinese'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_math[18]'],
  'gold': '$\\frac{9.5}{3.14159}$',
  'pred': '$\\frac{9.5}{3.14159} \\approx 3.01$',
  'expected': True,
  'language': 'chinese'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_math[19]'],
  'gold': '67',
  'pred': ' ा गणना**: दुकान में शुरूआत में 56 कमीजें थीं। 2. जोड़ने वाली संख्या गणना: बाद में 11 '
          'और कमीजें मिलीं। 3. कुल संख्या गणना: मूल संख्या और जोड़ी गई संख्या को जोड़ने पर दुकान '
          'में अब कितनी कमीजें हैं ज्ञात कर सकते हैं। इसलिए, गणना करें: [ 56 + 11 = 67 ] इसलिए, '
          'दुकान में अब 67 कमीजें हैं। ',
  'expected': True,
  'language': 'hindi'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_math[20]'],
  'gold': '0',
  'pred': 'So the os then when we 9/3 we get 8 so the answer is 0',
  'expected': True},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_math_latex_numbers[0]'],
  'gold': '1',
  'pred': 'so $x+y = 1000$ therefore answer is $1$',
  'expected': True,
  'language': 'french'},
 {'src': ['lv:test_extractive_match.py::test_multilingual_extraction_math_latex_numbers[1]'],
  'gold': '1',
  'pred': 'how many $? just about 1$',
  'expected': True},
 {'src': ['lv:test_extractive_match.py::test_math_numina_cases[26]'],
  'gold': '\\boxed{ p = 5, q = 2 \\quad \\text{and} \\quad p = 7, q = 2}',
  'pred': '$p=5,q=2;p=7,q=2$',
  'expected': True},
 {'src': ['lv:test_extractive_match.py::test_math_numina_cases[35]'],
  'gold': '\\boxed{1} and and and or thus but \\boxed{2} and \\boxed{3}',
  'pred': '$\\boxed{2,3}$',
  'expected': True},
 {'src': ['lv:test_extractive_match.py::test_math_numina_cases[36]'],
  'gold': '\\boxed{1} and and and or thus but \\boxed{2} and \\boxed{3}',
  'pred': '$\\boxed{1,2,3}$',
  'expected': False}]
